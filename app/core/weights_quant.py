"""Bytes of one weight tensor on one rank under a checkpoint's ``quantization_config``.

A ``Scheme`` prices a (rows × cols) weight shard as vLLM allocates it: the packed values plus
their scales (per tensor, per output channel, per 128×128 block, or per group along the input
dimension) and zero points. ``quant_plan`` reads the config into a scheme for linear layers,
one for fused-MoE experts, and the list of modules the config keeps unquantized. Rules follow
vLLM @28be48fa9 (2026-05-24) unless a line says otherwise:

- fp8 (``Fp8Config``, quantization/fp8.py): float8_e4m3 weights; ``weight_block_size`` →
  fp32 ``weight_scale_inv`` of ceil(out/128) × ceil(in/128) per shard (``create_fp8_scale_parameter``),
  else one fp32 scale per logical weight (+ one input scale for ``activation_scheme: static``);
  ``ignored_layers`` (else ``modules_to_not_convert``) matched as full prefixes (``is_layer_skipped``).
- compressed-tensors (compressed_tensors.py, schemes/*): ``config_groups[*].weights``:
  ``num_bits``/``type``/``strategy`` (tensor, channel: fp32 [out, 1] ``weight_scale``; group:
  params-dtype [out, in/group] scales, int32-packed zero points when asymmetric (wNa16); block);
  ``ignore`` matched exactly or as ``re:`` regex (``should_ignore_layer``).
- awq / awq_marlin (awq.py, awq_marlin.py): int32 ``qweight`` [in, out/8], fp16 ``scales``
  [in/group, out], int32 ``qzeros`` [in/group, out/8]; Marlin repacking keeps the same sizes.
  ``modules_to_not_convert`` matched as substrings (``is_layer_skipped_awq``).
- gptq (gptq_marlin.py, the kernel vLLM picks on CUDA sm80+ when compatible): int32 ``qweight``,
  fp16 scales per group; ``g_idx`` is dropped unless ``desc_act`` (then it and its sort indices
  stay, 2 × in int32); zero points dropped for symmetric checkpoints (``marlin_make_empty_g_idx``).
- mxfp4 (mxfp4.py ``Mxfp4MoEMethod.create_weights``): experts only, uint8 packed pairs plus one
  uint8 scale per 32 values; attention, router, embeddings stay bf16.
- modelopt (modelopt.py): ``quant_algo`` FP8 → per-tensor fp8; NVFP4 → 4-bit values, one fp8
  scale per 16 and fp32 global scales; ``exclude_modules`` as wildcards.
"""

from __future__ import annotations

import difflib
import fnmatch
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.core.errors import InputError

# vllm/model_executor/layers/quantization/__init__.py QuantizationMethods @28be48fa9, plus methods
# of earlier releases (aqlm, marlin, deepspeedfp, hqq, …) and HF's own spellings of the same formats.
VLLM_METHODS = frozenset(
    (
        "awq",
        "fp8",
        "fbgemm_fp8",
        "fp_quant",
        "modelopt",
        "modelopt_fp4",
        "modelopt_mxfp8",
        "modelopt_mixed",
        "gguf",
        "auto_gptq",
        "gptq",
        "gptq_marlin",
        "awq_marlin",
        "humming",
        "compressed-tensors",
        "bitsandbytes",
        "experts_int8",
        "quark",
        "moe_wna16",
        "torchao",
        "inc",
        "mxfp4",
        "gpt_oss_mxfp4",
        "deepseek_v4_fp8",
        "cpu_awq",
        "online",
        "fp8_per_tensor",
        "fp8_per_block",
        "int8_per_channel_weight_only",
        "mxfp8",
        "aqlm",
        "marlin",
        "deepspeedfp",
        "tpu_int8",
        "hqq",
        "ipex",
        "qqq",
        "ptpc_fp8",
        "rtn",
        "petit_nvfp4",
        "bitblas",
        "gptq_bitblas",
        "gptq_marlin_24",
        "compressed_tensors",
    )
)


@dataclass(frozen=True)
class Scheme:
    """How one weight tensor is stored: bits per value and its scales/zero points."""

    name: str
    weight_bits: int
    scale: str = "none"  # none | tensor | channel | block | group
    scale_bytes: int = 4
    group: int = 0  # values per scale along the input dimension (scale == "group")
    block: tuple[int, int] = (128, 128)
    zero_bits: int = 0  # packed zero point per group (asymmetric int formats)
    per_input_bytes: int = 0  # e.g. GPTQ act-order g_idx + sort indices per input column
    tensor_bytes: int = 0  # fixed extras per tensor (fp32 global / input scales)

    def nbytes(self, rows: int, cols: int) -> int:
        """Bytes of one (rows × cols) shard: values + scales + zero points."""
        values = rows * cols * self.weight_bits // 8
        if self.scale == "tensor":
            extra = self.scale_bytes
        elif self.scale == "channel":
            extra = rows * self.scale_bytes
        elif self.scale == "block":
            br, bc = self.block
            extra = -(-rows // br) * -(-cols // bc) * self.scale_bytes
        elif self.scale == "group":
            groups = rows * -(-cols // self.group)
            extra = groups * self.scale_bytes + groups * self.zero_bits // 8
        else:
            extra = 0
        return values + extra + cols * self.per_input_bytes + self.tensor_bytes


@dataclass(frozen=True)
class QuantPlan:
    """The checkpoint's quantization as vLLM applies it."""

    method: str | None
    linear: Scheme | None  # None: linear layers at the model dtype
    experts: Scheme | None
    ignore: tuple[str, ...] = ()
    match: str = "prefix"  # prefix (full name / regex / wildcard) | substring
    notes: tuple[str, ...] = ()
    pad_expert_intermediate: int = 1  # mxfp4: vLLM rounds each rank's expert intermediate up

    def scheme_for(self, name: str, experts: bool) -> Scheme | None:
        """The scheme of a quantizable tensor named ``name`` (None: kept at the model dtype)."""
        scheme = self.experts if experts else self.linear
        if scheme is None or not self.ignore:
            return scheme
        return None if self._matcher(name) else scheme

    @functools.cached_property
    def _matcher(self) -> _Matcher:
        return _matcher(self.ignore, self.match)


@dataclass(frozen=True)
class _Matcher:
    """vLLM ``is_layer_skipped`` / ``should_ignore_layer``: exact, ``re:`` regex, wildcard, substring."""

    exact: frozenset[str]
    regexes: tuple[re.Pattern[str], ...]
    substrings: tuple[str, ...]

    def __call__(self, name: str) -> bool:
        short = name.split("model.", 1)[-1] if name.startswith(("model.", "language_model.")) else name
        if self.exact:
            parts = name.split(".")
            # prefix match (the pattern names a parent module) or suffix match (a relative name)
            heads = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            tails = {".".join(parts[i:]) for i in range(1, len(parts))}
            if short in self.exact or not self.exact.isdisjoint(heads | tails):
                return True
        if any(r.match(name) or r.match(short) for r in self.regexes):
            return True
        return any(sub in name for sub in self.substrings)


def _matcher(patterns: tuple[str, ...], match: str) -> _Matcher:
    regexes = [re.compile(p[3:]) for p in patterns if p.startswith("re:")]
    wild = [p for p in patterns if "*" in p and not p.startswith("re:")]
    regexes += [re.compile(fnmatch.translate(p) + "|" + fnmatch.translate(p + ".*")) for p in wild]
    plain = [p for p in patterns if "*" not in p and not p.startswith("re:")]
    if match == "substring":
        return _Matcher(frozenset(), tuple(regexes), tuple(plain))
    return _Matcher(frozenset(plain), tuple(regexes), ())


def _patterns(qc: Mapping[str, object], *keys: str) -> tuple[str, ...]:
    for key in keys:
        value = qc.get(key)
        if isinstance(value, Sequence) and not isinstance(value, str) and value:
            return tuple(str(v) for v in value)
    return ()


def _int(qc: Mapping[str, object], default: int, *keys: str) -> int:
    for key in keys:
        value = qc.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


def _fp8(qc: Mapping[str, object]) -> QuantPlan:
    block = qc.get("weight_block_size")
    static = qc.get("activation_scheme") == "static"
    if isinstance(block, Sequence) and len(block) == 2:
        scheme = Scheme(
            "fp8 128×128-block" if list(block) == [128, 128] else f"fp8 {block}-block",
            8,
            "block",
            block=(int(block[0]), int(block[1])),
            tensor_bytes=4 if static else 0,
        )
    else:
        scheme = Scheme("fp8 per-tensor", 8, "tensor", tensor_bytes=4 if static else 0)
    return QuantPlan("fp8", scheme, scheme, _patterns(qc, "ignored_layers", "modules_to_not_convert"))


def _awq(qc: Mapping[str, object], method: str) -> QuantPlan:
    bits = _int(qc, 4, "bits", "w_bit")
    group = _int(qc, 128, "group_size", "q_group_size")
    zero = qc.get("zero_point", True) is not False
    scheme = Scheme(
        f"awq int{bits} g{group}", bits, "group", 2, group if group > 0 else 1 << 30, zero_bits=bits if zero else 0
    )
    return QuantPlan(method, scheme, scheme, _patterns(qc, "modules_to_not_convert"), "substring")


def _gptq(qc: Mapping[str, object], method: str) -> QuantPlan:
    bits = _int(qc, 4, "bits", "w_bit")
    group = _int(qc, 128, "group_size")
    act_order = bool(qc.get("desc_act"))
    sym = qc.get("sym", True) is not False
    scheme = Scheme(
        f"gptq int{bits} g{group} (Marlin)",
        bits,
        "group",
        2,
        group if group > 0 else 1 << 30,
        zero_bits=0 if sym else bits,
        per_input_bytes=8 if act_order else 0,
    )
    notes = ("gptq: sized as vLLM's Marlin kernel keeps it (CUDA sm80+); g_idx dropped unless desc_act",)
    return QuantPlan(method, scheme, scheme, _patterns(qc, "modules_to_not_convert"), "substring", notes)


def _ct_scheme(weights: Mapping[str, object], dtype_bytes: int) -> Scheme:
    bits = _int(weights, 8, "num_bits")
    kind = str(weights.get("type", "int"))
    strategy = str(weights.get("strategy", "tensor"))
    label = f"compressed-tensors {kind}{bits} {strategy}"
    if strategy == "channel":
        return Scheme(label, bits, "channel", 4)
    if strategy == "block":
        raw = weights.get("block_structure")
        block = (int(raw[0]), int(raw[1])) if isinstance(raw, Sequence) and len(raw) == 2 else (128, 128)
        return Scheme(label, bits, "block", 4, block=block)
    if strategy in ("group", "tensor_group"):
        group = _int(weights, 128, "group_size")
        zero = bits if weights.get("symmetric") is False else 0
        if kind == "float" and bits == 4:  # NVFP4: fp8 scale per 16 + fp32 global scale
            return Scheme(label, 4, "group", 1, group, tensor_bytes=4)
        return Scheme(label, bits, "group", dtype_bytes, group, zero_bits=zero)
    return Scheme(label, bits, "tensor", 4)


def _compressed_tensors(qc: Mapping[str, object], dtype_bytes: int) -> QuantPlan:
    groups = qc.get("config_groups")
    if not isinstance(groups, Mapping) or not groups:
        raise InputError("model.config.quantization_config.config_groups", "compressed-tensors needs config_groups")
    linear = experts = None
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if not isinstance(weights, Mapping):
            continue
        scheme = _ct_scheme(weights, dtype_bytes)
        targets = [str(t) for t in group.get("targets", ["Linear"])] if isinstance(group, Mapping) else []
        if any("expert" in t.lower() for t in targets) and linear is not None:
            experts = scheme
        else:
            linear = linear or scheme
    if linear is None:
        raise InputError("model.config.quantization_config.config_groups", "no group states its weights scheme")
    return QuantPlan("compressed-tensors", linear, experts or linear, _patterns(qc, "ignore"))


def _modelopt(qc: Mapping[str, object], method: str) -> QuantPlan:
    inner = qc.get("quantization")
    src = inner if isinstance(inner, Mapping) else qc
    algo = str(src.get("quant_algo", "FP8")).upper()
    ignore = _patterns(src, "exclude_modules", "ignore") or _patterns(qc, "exclude_modules", "ignore")
    if "FP4" in algo or method == "modelopt_fp4":
        group = _int(src, 16, "group_size")
        scheme = Scheme(f"modelopt nvfp4 g{group}", 4, "group", 1, group, tensor_bytes=8)
    else:
        scheme = Scheme("modelopt fp8 per-tensor", 8, "tensor", tensor_bytes=4)
    return QuantPlan(method, scheme, scheme, ignore)


def _mxfp4(qc: Mapping[str, object], method: str) -> QuantPlan:
    # Mxfp4MoEMethod: uint8 packed pairs + one uint8 scale per 32; linear layers unquantized.
    # mxfp4_round_up_hidden_size_and_intermediate_size (fused_moe/oracle/mxfp4.py): the default
    # (triton) backend rounds each rank's intermediate up to 64; Marlin to 128 and hidden to 256
    # (weights_tensor.mxfp4_expert_bytes prices both).
    scheme = Scheme("mxfp4 (uint8 scale per 32)", 4, "group", 1, 32)
    note = (
        "mxfp4: experts as the MoE backend holds them (weights_tensor.mxfp4_layout): Marlin below compute "
        "capability 9.0 and before v0.12 (hidden padded to 256, intermediate to 128); else Triton's swizzled "
        "layout (triton_kernels v3.5 / v3.6 padding, scales held twice, float32 biases)"
    )
    return QuantPlan(method, None, scheme, _patterns(qc, "modules_to_not_convert"), "prefix", (note,), 64)


# gpt-oss's expert biases under an MXFP4 checkpoint: bf16 as loaded; the MXFP4 backend decides what it
# keeps (weights_tensor.mxfp4_expert_bytes: float32 copies under Triton).
MXFP4_BIAS = Scheme("mxfp4 expert bias (bf16)", 16)


def quant_plan(config: Mapping[str, object], dtype_bytes: int) -> QuantPlan:
    """The QuantPlan of a config.json (its ``quantization_config``, also under ``text_config``)."""
    qc = config.get("quantization_config") or config.get("compression_config")
    text = config.get("text_config")
    if qc is None and isinstance(text, Mapping):
        qc = text.get("quantization_config")
    if qc is None:
        return QuantPlan(None, None, None)
    if not isinstance(qc, Mapping):
        raise InputError("model.config.quantization_config", "expected a JSON object")
    method = str(qc.get("quant_method") or ("compressed-tensors" if "config_groups" in qc else ""))
    method = method.replace("_", "-") if method == "compressed_tensors" else method
    return _plan_for(method, qc, dtype_bytes)


def _plan_for(method: str, qc: Mapping[str, object], dtype_bytes: int) -> QuantPlan:
    if method == "fp8":
        return _fp8(qc)
    if method in ("awq", "awq_marlin", "cpu_awq"):
        return _awq(qc, method)
    if method in ("gptq", "gptq_marlin", "auto_gptq"):
        return _gptq(qc, method)
    if method == "compressed-tensors":
        return _compressed_tensors(qc, dtype_bytes)
    if method.startswith("modelopt"):
        return _modelopt(qc, method)
    if method in ("mxfp4", "gpt_oss_mxfp4"):
        return _mxfp4(qc, method)
    if method == "fbgemm_fp8":
        scheme = Scheme("fbgemm fp8 per-channel", 8, "channel", 4)
        return QuantPlan(method, scheme, scheme, _patterns(qc, "modules_to_not_convert"), "substring")
    if method == "bitsandbytes":
        return _bitsandbytes(qc)
    if method not in VLLM_METHODS:
        near = difflib.get_close_matches(method.lower(), sorted(VLLM_METHODS), n=3, cutoff=0.5)
        raise InputError(
            "model.config.quantization_config.quant_method",
            f"{method or '(missing)'!r} is not a quantization method vLLM supports "
            f"({'nearest: ' + ', '.join(near) if near else 'e.g. fp8, awq, gptq, compressed-tensors, mxfp4'}; "
            "vLLM's QuantizationMethods, vllm/model_executor/layers/quantization/__init__.py @28be48fa9)",
        )
    note = (
        f"quantization_config.quant_method {method!r} is not modelled: "
        "weights counted at the model dtype (an upper bound)"
    )
    return QuantPlan(method, None, None, notes=(note,))


def _bitsandbytes(qc: Mapping[str, object]) -> QuantPlan:
    # bitsandbytes.py: 4-bit (nf4/fp4) values with an absmax per 64 (fp32, or 8-bit with double
    # quantization); 8-bit: int8 with fp32 row statistics.
    if qc.get("load_in_8bit"):
        scheme = Scheme("bitsandbytes int8", 8, "channel", 4)
    else:
        double = bool(qc.get("bnb_4bit_use_double_quant"))
        scheme = Scheme("bitsandbytes 4-bit", 4, "group", 1 if double else 4, 64)
    return QuantPlan("bitsandbytes", scheme, scheme, _patterns(qc, "llm_int8_skip_modules"), "substring")


def online_fp8_plan() -> QuantPlan:
    """vLLM's ``--quantization fp8`` on an unquantized checkpoint (Fp8Config with no
    weight_block_size, quantization/fp8.py): every linear and expert weight float8_e4m3 with one
    fp32 per-tensor scale, quantized after loading; embeddings, LM head and norms untouched."""
    scheme = Scheme("fp8 per-tensor (online)", 8, "tensor")
    return QuantPlan("fp8", scheme, scheme)
