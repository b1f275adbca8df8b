"""Mixture-of-experts layout of a decoder: which MLPs are routed experts, how many a token uses.

A MoE model stores every expert (its memory is the *total* parameters), computes only the
``k`` experts each token is routed to (its FLOPs are the *active* parameters), and a step
of ``T`` tokens reads the weights of the distinct experts its tokens touch. With routing
taken as uniform and independent per token, one expert is missed by all ``T`` tokens with
probability ``(1 - k/E)^T``, so a MoE layer reads ``E * (1 - (1 - k/E)^T)`` experts in
expectation: ``k`` at one token, all ``E`` in a large prefill. Real routers are skewed
(fewer distinct experts than uniform); uniform is the conservative side for bytes.

Three config families are read, by their Hugging Face field names:

- Mixtral: ``num_local_experts``, ``num_experts_per_tok``; every layer's MLP is routed and each
  expert has ``intermediate_size``;
- Qwen-MoE (Qwen1.5/2/3-MoE): ``num_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``shared_expert_intermediate_size`` (Qwen2-MoE's always-on expert, gated by one scalar),
  ``decoder_sparse_step`` and ``mlp_only_layers`` (layers that keep a dense MLP);
- DeepSeek-MoE: ``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
  ``n_shared_experts`` (each of ``moe_intermediate_size``), ``first_k_dense_replace`` and
  ``moe_layer_freq`` (DeepSeek-V2/V3's multi-head latent attention is ``attention.py``'s);
- gpt-oss: Mixtral's field names, plus ``experts_per_token`` (its copy of ``num_experts_per_tok``);
- Llama-4: Mixtral's field names, ``interleave_moe_layer_step`` (every k-th layer routed, from layer k - 1, as
  ``decoder_sparse_step``; transformers 5.17 ``Llama4TextConfig.moe_layers``) or ``moe_layers`` (the routed layers'
  indices), one always-on shared expert of ``intermediate_size`` per routed layer (``Llama4TextMoe.shared_expert``)
  and the dense layers' own width ``intermediate_size_mlp`` (``shape.py``);
- Nemotron-3 (Nano, Super, Ultra): DeepSeek's field names, the MoE layers placed by the block pattern's ``E`` /
  ``moe`` entries (``layer_pattern.placed_moe_layers``), a shared expert of ``moe_shared_expert_intermediate_size x
  n_shared_experts`` in the hidden space, and, in Super and Ultra, a latent MoE: ``moe_latent_size`` is the routed
  experts' input and output width, reached through ``fc1_latent_proj`` (hidden -> latent) and ``fc2_latent_proj``
  (latent -> hidden), both replicated on every tensor-parallel GPU (vLLM ``model_executor/models/nemotron_h.py``
  @ 00b08dc4, ``NemotronHMoE``: ``ReplicatedLinear``; the experts' ``hidden_size=self.moe_hidden_size``).
  ``moe_shared_expert_overlap`` only schedules the shared expert beside the routed ones;
- Gemma-4 MoE (26B-A4B): ``num_experts``, ``top_k_experts``, ``moe_intermediate_size`` (or
  ``expert_intermediate_size``) and ``enable_moe_block``: every layer runs its dense MLP of ``intermediate_size`` and,
  beside it on the same input, the routed experts, the two outputs summed (vLLM ``model_executor/models/gemma4.py``
  @ 001cabc1, ``Gemma4DecoderLayer.forward``: "MLP runs unconditionally"), so the dense MLP is priced as an always-on
  shared expert; its router (``Gemma4Router.proj``, hidden x experts) as every family's.

Any other expert/MoE/router field is refused by name (:class:`BadInputError`): a layout this
module does not understand is never silently treated as dense.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.errors import BadInputError

#: The expert-count fields, by family; the first present (and > 1) makes the model MoE.
EXPERT_COUNT_FIELDS = ("num_local_experts", "num_experts", "n_routed_experts")
#: MoE fields this module reads.
UNDERSTOOD_FIELDS = frozenset(
    {
        *EXPERT_COUNT_FIELDS,
        "num_experts_per_tok",
        "moe_intermediate_size",
        "shared_expert_intermediate_size",
        "n_shared_experts",
        "first_k_dense_replace",
        "moe_layer_freq",
        "decoder_sparse_step",
        "mlp_only_layers",
        "interleave_moe_layer_step",
        "moe_layers",
        "moe_latent_size",
        "moe_shared_expert_intermediate_size",
        "top_k_experts",
        "enable_moe_block",
        "expert_intermediate_size",
    }
)
#: MoE fields that only matter to training (load-balancing losses, router noise) or to the router's
#: arithmetic, not to what is stored, read or computed.
IGNORED_FIELDS = frozenset(
    {
        "router_aux_loss_coef",
        "output_router_logits",
        "router_jitter_noise",
        "norm_topk_prob",
        "router_z_loss_coef",
        "moe_aux_loss_coef",
        "experts_per_token",
        "moe_shared_expert_overlap",
    }
)
#: Substrings that mark a field as part of a MoE layout.
_MOE_MARKERS = ("expert", "moe", "router")


@dataclass(frozen=True, slots=True)
class MoeLayout:
    """Routed experts of a decoder (per MoE layer) and the dense parts that sit beside them.

    Args:
        n_experts: routed experts per MoE layer (E).
        experts_per_token: experts each token is routed to (k).
        expert_intermediate: gated-MLP width of one routed expert.
        n_moe_layers: layers whose MLP is routed; the others keep a dense MLP of ``intermediate_size``.
        shared_intermediate: total gated-MLP width of the always-on shared experts of a MoE layer (0: none).
        shared_gate: whether the shared expert has a scalar gate (Qwen2-MoE: ``hidden`` x 1 weights).
        latent: the routed experts' input/output width when it is not the hidden size (Nemotron-3's latent MoE,
            reached through two replicated hidden x latent projections per MoE layer); 0: the hidden size.
    """

    n_experts: int
    experts_per_token: int
    expert_intermediate: int
    n_moe_layers: int
    shared_intermediate: int = 0
    shared_gate: bool = False
    latent: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.experts_per_token <= self.n_experts:
            raise BadInputError(
                "num_experts_per_tok",
                f"{self.experts_per_token} experts per token of {self.n_experts}",
                "give 1 <= num_experts_per_tok <= the number of experts",
            )

    def expected_distinct_experts(self, tokens: int) -> float:
        """Experts of one MoE layer that a step of `tokens` tokens reads, in expectation: E(1 - (1 - k/E)^T)."""
        if tokens <= 0:
            return 0.0
        e, k = self.n_experts, self.experts_per_token
        return e * (1.0 - (1.0 - k / e) ** tokens)


def _int_field(config: Any, name: str, default: int | None = None) -> int:
    value = getattr(config, name, None)
    if value is None:
        if default is None:
            raise BadInputError(name, "missing from a mixture-of-experts config", f"add {name} to config.json")
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadInputError(name, f"{value!r} is not an integer", "give a whole number") from None


def _fields(config: Any) -> dict[str, object]:
    """The config's fields, nested dicts flattened (DBRX keeps its experts in ``ffn_config``)."""
    found: dict[str, object] = {}
    for key, value in vars(config).items():
        if key.startswith("_"):  # transformers' internals (_experts_implementation_internal), our _name / _source
            continue
        found[key] = value
        if isinstance(value, dict):
            found.update({f"{key}.{k}": v for k, v in value.items()})
    return found


def _check_understood(config: Any) -> None:
    """Refuse, by name, a MoE field this module does not read."""
    for key in _fields(config):
        leaf = key.rsplit(".", 1)[-1]
        if leaf in UNDERSTOOD_FIELDS | IGNORED_FIELDS and "." not in key:
            continue
        if any(marker in leaf.lower() for marker in _MOE_MARKERS):
            raise BadInputError(
                key,
                "a mixture-of-experts field this tool does not model",
                f"supported layouts: Mixtral, Qwen-MoE, DeepSeek-MoE ({', '.join(sorted(UNDERSTOOD_FIELDS))})",
            )


def _is_llama4(config: Any) -> bool:
    """Llama-4's MoE layout: its interleave field (or explicit list) beside Mixtral's expert count."""
    return any(getattr(config, f, None) is not None for f in ("interleave_moe_layer_step", "moe_layers"))


def _moe_layer_count(config: Any, n_layers: int) -> int:
    """Layers with a routed MLP, from each family's placement fields (all layers when none is given)."""
    listed = getattr(config, "moe_layers", None)
    if listed is not None:  # Llama-4's explicit list overrides its step
        return sum(1 for i in {int(j) for j in listed} if 0 <= i < n_layers)
    first_dense = _int_field(config, "first_k_dense_replace", 0)
    freq = _int_field(config, "moe_layer_freq", 1)
    step = _int_field(config, "decoder_sparse_step", _int_field(config, "interleave_moe_layer_step", 1))
    dense_only = {int(i) for i in (getattr(config, "mlp_only_layers", None) or [])}
    if min(freq, step) < 1:
        raise BadInputError("moe_layer_freq", f"{freq} / decoder_sparse_step {step}", "give a positive layer period")
    return sum(
        1 for i in range(n_layers) if i >= first_dense and i % freq == 0 and (i + 1) % step == 0 and i not in dense_only
    )


def parse_moe(
    config: Any, *, n_layers: int, intermediate: int, placed: int | None = None, placed_by: str = ""
) -> MoeLayout | None:
    """The MoE layout of `config`, or None for a dense model; unknown MoE layouts are refused by field name.
    `placed`: the MoE layers a block pattern (`placed_by`, Nemotron's) names, which then decides where they are."""
    _check_understood(config)
    count_field = next((f for f in EXPERT_COUNT_FIELDS if (getattr(config, f, None) or 0) > 1), None)
    if count_field is None:
        if placed:
            raise BadInputError(
                placed_by, f"{placed} mixture-of-experts blocks (E / moe) and no routed experts", "add n_routed_experts"
            )
        return None
    n_experts = _int_field(config, count_field)
    if placed == 0:
        raise BadInputError(
            placed_by,
            f"no mixture-of-experts block (E / moe) holds the {n_experts} experts of {count_field}",
            "mark the model's MoE layers E (moe), as its published config does",
        )
    per_expert = _int_field(
        config, "moe_intermediate_size", _int_field(config, "expert_intermediate_size", intermediate)
    )
    shared = _int_field(config, "shared_expert_intermediate_size", 0)
    nemotron_shared = _int_field(config, "moe_shared_expert_intermediate_size", 0)
    if nemotron_shared:  # vLLM NemotronHMoE: one MLP of moe_shared_expert_intermediate_size x n_shared_experts
        shared += nemotron_shared * _int_field(config, "n_shared_experts", 1)
    else:
        shared += _int_field(config, "n_shared_experts", 0) * per_expert
    if _is_llama4(config):  # one shared expert beside the routed ones in every MoE layer
        shared += per_expert
    if getattr(config, "enable_moe_block", None) is True:  # Gemma-4: the dense MLP beside the experts
        shared += intermediate
    gemma_top_k = getattr(config, "num_experts_per_tok", None) is None and getattr(config, "top_k_experts", None)
    top_k = "top_k_experts" if gemma_top_k else "num_experts_per_tok"
    if not 1 <= _int_field(config, top_k) <= n_experts:
        raise BadInputError(
            top_k,
            f"{_int_field(config, top_k)} experts per token of {n_experts}",
            f"give 1 <= {top_k} <= {count_field}",
        )
    return MoeLayout(
        n_experts=n_experts,
        experts_per_token=_int_field(config, top_k),
        expert_intermediate=per_expert,
        n_moe_layers=placed if placed is not None else _moe_layer_count(config, n_layers),
        shared_intermediate=shared,
        shared_gate=getattr(config, "shared_expert_intermediate_size", None) is not None,
        latent=_int_field(config, "moe_latent_size", 0),
    )
