"""A checkpoint's own description of its quantization, per backend, checked against the scheme it is scored as.

`recommender eval --scheme S --checkpoint DIR` puts S's name on DIR's numbers, so DIR must be S whatever file
the tool left beside it: a ModelOpt NVFP4 export without its ``modelopt_recipe.json`` (as ModelOpt's own
scripts leave it) is not ``modelopt-fp8``. The checkpoint says what it is in the files the engines read —
config.json's ``quantization_config`` (compressed-tensors' ``config_groups``, ModelOpt's ``quant_algo``, Quark's
``global_quant_config``, GPTQ's ``bits``/``group_size``, bitsandbytes' ``bnb_4bit_quant_type``, ...) and
ModelOpt's ``hf_quant_config.json``. One reader per ``quant_method`` (`READERS`) turns that into a `Described`
(method, algorithm, group size, KV-cache dtype), `expected` says the same for a scheme from its own settings,
and `check_checkpoint_metadata` compares them field by field: the first that differs is one line naming the
checkpoint's field, what it says, what the scheme is, and the registered scheme the checkpoint is (if any).
A field the checkpoint leaves out (a group size ModelOpt writes only elsewhere) contradicts nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recommender.errors import BadInputError
from recommender.input_files import load_json
from recommender.quantize.checkpoint_scheme import CheckpointScheme
from recommender.quantize.llmcompressor import LlmCompressorScheme
from recommender.quantize.modelopt import ModelOptScheme
from recommender.quantize.quark import QuarkScheme

#: The fields compared, in order (the first that differs is the one named).
FIELDS = ("quant_method", "algorithm", "group_size", "kv_cache")

#: compressed-tensors' preset schemes as its checkpoints write them (``config_groups.*.weights`` and
#: ``input_activations``; compressed-tensors 0.19.0 ``PRESET_SCHEMES``, checked in
#: tests/quantize/test_llmcompressor.py).
_INT4 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "dynamic": False}
_FP4 = {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True}
_MX = {"num_bits": 4, "type": "float", "strategy": "group", "group_size": 32, "symmetric": True}
_FP8 = {"num_bits": 8, "type": "float", "symmetric": True}
CT_PRESETS: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {
    "W4A16": ({**_INT4, "symmetric": True}, None),
    "W4A16_ASYM": ({**_INT4, "symmetric": False}, None),
    "W8A8": (
        {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True, "dynamic": False},
        {"num_bits": 8, "type": "int", "strategy": "token", "symmetric": True, "dynamic": True},
    ),
    "FP8": ({**_FP8, "strategy": "tensor", "dynamic": False}, {**_FP8, "strategy": "tensor", "dynamic": False}),
    "FP8_DYNAMIC": ({**_FP8, "strategy": "channel", "dynamic": False}, {**_FP8, "strategy": "token", "dynamic": True}),
    "FP8_BLOCK": (
        {**_FP8, "strategy": "block", "dynamic": False},
        {**_FP8, "strategy": "group", "group_size": 128, "dynamic": True},
    ),
    "NVFP4": ({**_FP4, "dynamic": False}, {**_FP4, "dynamic": "local"}),
    "NVFP4A16": ({**_FP4, "dynamic": False}, None),
    "MXFP4": ({**_MX, "dynamic": False}, {**_MX, "dynamic": True}),
}
#: ModelOpt's configs as its exports name them (``quant_algo``) with the group size they write.
MODELOPT_ALGOS = {
    "FP8_DEFAULT_CFG": ("FP8", None),
    "NVFP4_DEFAULT_CFG": ("NVFP4", 16),
    "INT4_AWQ_CFG": ("W4A16_AWQ", 128),
}


@dataclass(frozen=True)
class Described:
    """A checkpoint's quantization in one vocabulary for every backend (None: the checkpoint does not say).

    `where` names, per field, the place in the checkpoint it was read from (for the refusal)."""

    quant_method: str
    algorithm: str
    group_size: int | None = None
    kv_cache: str = "auto"
    where: dict[str, str] = field(default_factory=dict, compare=False)

    def location(self, name: str) -> str:
        return self.where.get(name, f"quantization_config.{name}")


def _args_text(args: dict[str, Any], role: str) -> str:
    """``int4 symmetric per-group weights`` from compressed-tensors' quantization args."""
    sym = "symmetric" if args.get("symmetric", True) else "asymmetric"
    dynamic = args.get("dynamic", False)
    timing = "" if role == "weights" else {True: " dynamic", False: " static"}.get(dynamic, f" {dynamic}")
    return f"{args.get('type')}{args.get('num_bits')}{timing} {sym} per-{args.get('strategy')} {role}"


def describe_compressed_tensors(quant: dict[str, Any]) -> Described:
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups or not all(isinstance(g, dict) for g in groups.values()):
        return Described("compressed-tensors", "no config_groups", where={"algorithm": "quantization_config"})
    texts, sizes = set(), set()
    for group in groups.values():
        weights, acts = group.get("weights") or {}, group.get("input_activations")
        acts_text = _args_text(acts, "activations") if isinstance(acts, dict) else "16-bit activations"
        texts.add(f"{_args_text(weights, 'weights') if isinstance(weights, dict) else 'no weights'}, {acts_text}")
        sizes.add(weights.get("group_size") if isinstance(weights, dict) else None)
    kv = quant.get("kv_cache_scheme")
    return Described(
        "compressed-tensors",
        " + ".join(sorted(texts)),
        sizes.pop() if len(sizes) == 1 else None,
        _kv_from_args(kv),
        where={
            "algorithm": "quantization_config.config_groups",
            "group_size": "quantization_config.config_groups.*.weights.group_size",
            "kv_cache": "quantization_config.kv_cache_scheme",
        },
    )


def _kv_from_args(kv: Any) -> str:
    if not isinstance(kv, dict):
        return "auto"
    return f"{kv.get('type', 'float')}{kv.get('num_bits')}".replace("float8", "fp8")


def describe_modelopt(quant: dict[str, Any], hf_quant: dict[str, Any] | None) -> Described:
    """ModelOpt: config.json's flat ``quantization_config`` first (as the engines read it), else hf_quant_config."""
    if quant:
        groups = [g for g in (quant.get("config_groups") or {}).values() if isinstance(g, dict)]
        group = quant.get("group_size") or next(
            ((g.get("weights") or {}).get("group_size") for g in groups if (g.get("weights") or {}).get("group_size")),
            None,
        )
        group = group or (hf_quant or {}).get("group_size")
        kv, at, kv_key = _kv_from_args(quant.get("kv_cache_scheme")), "quantization_config", "kv_cache_scheme"
    else:
        quant, at, kv_key = hf_quant or {}, "hf_quant_config.json quantization", "kv_cache_quant_algo"
        group, kv = quant.get("group_size"), str(quant.get("kv_cache_quant_algo") or "auto").lower()
    names = {"algorithm": "quant_algo", "group_size": "group_size", "kv_cache": kv_key}
    return Described(
        "modelopt",
        str(quant.get("quant_algo", "")).upper() or "no quant_algo",
        int(group) if isinstance(group, int) else None,
        kv,
        where={f: f"{at}.{name}" for f, name in names.items()},
    )


def describe_quark(quant: dict[str, Any]) -> Described:
    glob = quant.get("global_quant_config") or {}
    weight, inputs = glob.get("weight") or {}, glob.get("input_tensors") or {}

    def text(args: dict[str, Any], role: str) -> str:
        timing = "dynamic" if args.get("is_dynamic") else "static"
        return f"{args.get('dtype')} {timing} {args.get('qscheme')} {role}" if args else f"16-bit {role}"

    algorithm = f"{text(weight, 'weights')}, {text(inputs, 'inputs')}"
    if quant.get("layer_quant_config"):
        algorithm += " + per-layer overrides"
    kv = "fp8" if quant.get("kv_cache_group") and quant.get("kv_cache_quant_config") else "auto"
    return Described("quark", algorithm, None, kv, where={"algorithm": "quantization_config.global_quant_config"})


def _gptq(quant: dict[str, Any]) -> Described:
    sym = "symmetric" if quant.get("sym", True) else "asymmetric"
    return Described("gptq", f"int{quant.get('bits')} {sym} GPTQ", quant.get("group_size"))


def _awq(quant: dict[str, Any]) -> Described:
    bits, zero = quant.get("bits", quant.get("w_bit")), quant.get("zero_point", True)
    algorithm = f"int{bits} {'asymmetric' if zero else 'symmetric'} AWQ ({quant.get('version', 'gemm')})"
    return Described("awq", algorithm, quant.get("group_size", quant.get("q_group_size")))


def _bitsandbytes(quant: dict[str, Any]) -> Described:
    if quant.get("load_in_4bit"):
        return Described("bitsandbytes", str(quant.get("bnb_4bit_quant_type", "fp4")).lower())
    return Described("bitsandbytes", "LLM.int8" if quant.get("load_in_8bit") else "no load_in_4bit/8bit")


def _torchao(quant: dict[str, Any]) -> Described:
    kind = quant.get("quant_type")
    if isinstance(kind, dict):  # transformers >= 4.52 writes {"default": {"_type": "Int4WeightOnlyConfig", ...}}
        kind = next((v.get("_type") for v in kind.values() if isinstance(v, dict)), kind)
    return Described("torchao", str(kind))


def _named(method: str, key: str) -> Callable[[dict[str, Any]], Described]:
    return lambda quant: Described(method, str(quant.get(key, method)))


#: One reader per ``quantization_config.quant_method`` of config.json (ModelOpt also reads hf_quant_config.json).
READERS: dict[str, Callable[[dict[str, Any]], Described]] = {
    "compressed-tensors": describe_compressed_tensors,
    "modelopt": lambda quant: describe_modelopt(quant, None),
    "quark": describe_quark,
    "gptq": _gptq,
    "awq": _awq,
    "bitsandbytes": _bitsandbytes,
    "torchao": _torchao,
    "fp8": lambda q: Described(
        "fp8", f"fp8 blocks {q.get('weight_block_size')}" if q.get("weight_block_size") else "fp8"
    ),
    "mxfp4": _named("mxfp4", "quant_method"),
    "hqq": lambda q: Described(
        "hqq", f"int{(q.get('quant_config') or {}).get('weight_quant_params', {}).get('nbits')}"
    ),
    "eetq": _named("eetq", "weights"),
    "aqlm": _named("aqlm", "quant_method"),
    "gguf": _named("gguf", "quant_method"),
}


def describe_checkpoint(path: Path, *, field: str = "--checkpoint") -> Described:
    """What the checkpoint at `path` says it is (config.json's quantization_config, hf_quant_config.json)."""
    config = load_json(path / "config.json", field=field, what="config.json")
    quant = config.get("quantization_config") or {}
    hf_file = path / "hf_quant_config.json"
    hf = load_json(hf_file, field=field, what="hf_quant_config.json") if hf_file.is_file() else None
    hf_quant = hf.get("quantization") if isinstance(hf, dict) else None
    if not isinstance(quant, dict):
        raise BadInputError(field, f"{path}: quantization_config is not a mapping", "give the checkpoint as written")
    method = str(quant.get("quant_method", "")).lower()
    if not quant and isinstance(hf_quant, dict):
        return describe_modelopt({}, hf_quant)
    if method == "modelopt":
        described = describe_modelopt(quant, hf_quant if isinstance(hf_quant, dict) else None)
        _check_modelopt_files_agree(path, described, hf_quant, field)
        return described
    if not quant:
        return Described("none", "16-bit", where={"quant_method": "config.json (no quantization_config)"})
    reader = READERS.get(method)
    return reader(quant) if reader is not None else Described(method or "none", method or "unnamed")


def _check_modelopt_files_agree(path: Path, described: Described, hf_quant: Any, field: str) -> None:
    """config.json and hf_quant_config.json name one algorithm: engines differ on which they read."""
    if not isinstance(hf_quant, dict) or not hf_quant.get("quant_algo"):
        return
    other = str(hf_quant["quant_algo"]).upper()
    if other != described.algorithm:
        raise BadInputError(
            field,
            f"{path}: config.json's quantization_config.quant_algo is {described.algorithm}, "
            f"hf_quant_config.json's is {other} (TensorRT-LLM and vLLM read different files)",
            "re-export the checkpoint so both files describe it",
        )


def expected(scheme: CheckpointScheme) -> Described:
    """What a checkpoint of `scheme` says about itself, from the scheme's own settings."""
    if isinstance(scheme, ModelOptScheme):
        algo, group = MODELOPT_ALGOS[scheme.config_name]
        return Described("modelopt", algo, group, "fp8" if scheme.kv_fp8 else "auto")
    if isinstance(scheme, QuarkScheme):
        args = {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}
        return describe_quark({"global_quant_config": {"weight": args, "input_tensors": args}})
    if isinstance(scheme, LlmCompressorScheme):
        weights, acts = CT_PRESETS[ct_preset(scheme)]
        groups = {"group_0": {"weights": weights, "input_activations": acts}}
        return describe_compressed_tensors({"config_groups": groups})
    raise TypeError(f"no checkpoint description for {type(scheme).__name__}")  # a new backend must add one


def ct_preset(scheme: LlmCompressorScheme) -> str:
    """The compressed-tensors preset an llm-compressor recipe applies (its ``scheme:`` line)."""
    names = [line.split(":", 1)[1].strip() for line in scheme.recipe.splitlines() if line.strip().startswith("scheme:")]
    if len(names) != 1 or names[0] not in CT_PRESETS:
        raise TypeError(f"{scheme.name}'s recipe applies no single known preset ({names})")
    return names[0]


def check_checkpoint_metadata(scheme: CheckpointScheme, path: Path, *, field: str = "--checkpoint") -> None:
    """Refuse (one line) scoring the checkpoint at `path` as `scheme` when what it says of itself is another scheme."""
    found, want = describe_checkpoint(path, field=field), expected(scheme)
    for name in FIELDS:
        have, need = getattr(found, name), getattr(want, name)
        if have == need or (name == "group_size" and (have is None or need is None)):
            continue
        raise BadInputError(
            field,
            f"{path}'s {found.location(name)} says {_text(have)}; {scheme.name} is {_text(need)}",
            _fix(found, scheme),
        )


def _text(value: object) -> str:
    return "none" if value is None else json.dumps(value) if not isinstance(value, str) else value


def _fix(found: Described, scheme: CheckpointScheme) -> str:
    """The registered scheme(s) this checkpoint is, else how to get a checkpoint of `scheme`."""
    from recommender.quantize import all_schemes

    schemes = [s for s in all_schemes().values() if isinstance(s, CheckpointScheme) and s.checkpoint_format]
    schemes += [v for s in schemes if isinstance(v := s.fp8_kv_variant(), CheckpointScheme) and v is not s]
    same = [s.name for s in schemes if expected(s) == found]
    if same:
        return f"score it as --scheme {' or '.join(same)}"
    return f"score a checkpoint written by `recommender quantize --scheme {scheme.name}`"
