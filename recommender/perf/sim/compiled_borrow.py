"""Borrowed arrays: views with no reference count, for the compiled loop's hot path (``compiled_loop.run_loop``).

numba counts references to every array it passes between compiled functions: each call increments and decrements
the count of each array argument, with an atomic instruction, wherever its reference-count pruning pass cannot prove
the pair redundant (in a function that calls another, or in a loop, it seldom can). The scheduler's step touches a
dozen arrays in a dozen functions, and with those functions inlined into the loop (``compiled_state``) the counts
were most of its time: of 50 stack samples of a replay at load (gdb, 2026-12-06), 31 were in ``NRT_incref`` or
``NRT_decref``. Borrowed, the replay runs about 6x faster (``benchmarks/simulator_speed.py``; figures in
``docs/benchmarks.md``).

``borrowed(a)`` is `a` without its memory-info pointer: the same data, shape and strides, whose increments and
decrements test a null pointer and return (numba's ``NRT_incref`` does so first). It owns nothing, so it is valid
only while an owning reference lives: ``run_loop`` borrows the arrays its caller passed (the caller holds them for
the call) and the ones it allocates, and keeps each owner referenced until it returns (``keep_alive``). An array a
callee allocates (the completions heap when it grows) is an owned array as any other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from recommender.perf.jit import cached_njit
from recommender.perf.sim.compiled_state import Prefix, RunArrays
from recommender.perf.step.compiled_cost import CostArrays

__all__ = ["borrowed", "borrowed_inputs", "borrowed_run", "keep_alive"]


def _borrowed(typingctx: Any, array: Any) -> Any:  # pragma: no cover (compiled)
    """`array`'s view with a null memory-info pointer (and no parent object): no reference counting."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        view = cgutils.create_struct_proxy(array)(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()

    return array(array), codegen


def _keep_alive(typingctx: Any, owners: Any) -> Any:  # pragma: no cover (compiled)
    """A use of `owners` (a tuple of arrays) that does nothing: placed where a run ends, it keeps numba from releasing
    the arrays a borrowed view reads before then (numba releases a variable after its last use)."""

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return context.get_dummy_value()

    return types.none(owners), codegen


#: Typed for the callers (numba's intrinsic is untyped to mypy): the same objects numba compiles.
borrowed = cast("Callable[[np.ndarray], np.ndarray]", intrinsic(_borrowed))
keep_alive = cast("Callable[[tuple[np.ndarray, ...]], None]", intrinsic(_keep_alive))


@cached_njit(error_model="numpy", inline="always")
def borrowed_run(a: RunArrays) -> RunArrays:  # pragma: no cover (compiled)
    """``compiled_state.new_run``'s arrays borrowed: valid while `a` lives."""
    return (
        borrowed(a[0]),
        borrowed(a[1]),
        borrowed(a[2]),
        borrowed(a[3]),
        borrowed(a[4]),
        borrowed(a[5]),
        borrowed(a[6]),
        borrowed(a[7]),
        borrowed(a[8]),
    )


@cached_njit(error_model="numpy", inline="always")
def borrowed_inputs(cost: CostArrays, px: Prefix) -> tuple[CostArrays, Prefix]:  # pragma: no cover (compiled)
    """The step cost's and the prefix cache's arrays borrowed (their caller holds them for the run)."""
    return (
        borrowed(cost[0]),
        borrowed(cost[1]),
        borrowed(cost[2]),
        borrowed(cost[3]),
        borrowed(cost[4]),
        borrowed(cost[5]),
    ), (borrowed(px[0]), borrowed(px[1]), borrowed(px[2]))
