"""Extractors for settings, versions, run markers and start-up errors.

Sources (VLLM-NOTES §1.10, §2.1, §6):
- engine config line `Initializing a V1 LLM engine (v%s) with config: model=…, dtype=…,
  max_seq_len=…, tensor_parallel_size=…` (vllm/v1/engine/core.py; V0 `Initializing an LLM engine`
  in vllm/engine/llm_engine.py), `vLLM API server version %s` (entrypoints/openai/api_server.py),
  `non-default args: {…}` (entrypoints/utils.py), `Using max model len %d`, `Setting attention
  block size to %d tokens` (platforms/interface.py:650), `Setting kv cache block size to %d`,
  `Chunked prefill is enabled with max_num_batched_tokens=%d`.
- start-up errors: V0 `The model's max seq len (%d) is larger than the maximum number of tokens
  that can be stored in KV cache (%d)` (worker/worker.py raise_if_cache_size_invalid), V1 `To
  serve at least one request with the models's max seq len (%d), (%s GiB KV cache is needed …
  (%s GiB). Based on the available memory, the estimated maximum model length is %d`
  (v1/core/kv_cache_utils.py:717ff; typo "models's" until 2026-05-15), `No available memory for
  the cache blocks` (kv_cache_utils.py:691); the free-memory error lives in vllm_log_lines; PyTorch's
  out-of-memory error wherever vLLM raised it at start-up (loading weights, the profile run, the KV
  tensors, graph capture, the sampler warm-up): `CUDA out of memory. Tried to allocate %s. GPU %d has a
  total capacity of %s of which %s is free. … Of the allocated memory %s is allocated by PyTorch`
  (c10/cuda/CUDACachingAllocator.cpp, torch ≥ 2.1; sizes from `format_size`: bytes, KiB, MiB, GiB).
- `init engine (profile, create kv cache, warmup model) took %.2f s` (v1/engine/core.py),
  `Auto-fit max_model_len: reduced from %d to %d` (kv_cache_utils.py).
"""

from __future__ import annotations

import ast
import math
import re

from app.ingest.vllm_log_lines import CINT, INT, Fact, N, count, seconds, size
from app.ingest.vllm_log_model import Value

_VERSION = r"([0-9][\w.+\-]{0,40})"
_API_VERSION = re.compile(r"vLLM API server version " + _VERSION)
# From v0.15 (PR #32796, vllm/entrypoints/utils.py `log_version_and_model`) the API server prints its
# version in a logo line (`… █ ▀▄▀ █  version %s`, colour codes removed before extractors run) or,
# with VLLM_DISABLE_LOG_LOGO, as `vLLM server version %s, serving model %s`; both replace the line above.
_SERVER_VERSION = re.compile(r"(?:▀▄▀ █ {1,4}version {1,4}|vLLM server version )" + _VERSION)
_ENGINE_VERSION = re.compile(r"LLM engine \(v" + _VERSION + r"\) with config: ")
_CONFIG = re.compile(r"with config: ")
_KEY = re.compile(r"([A-Za-z_]\w{0,60})=")

_CONFIG_INT = {
    "max_seq_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "seed": "seed",
}
_CONFIG_STR = {
    "model": "model",
    "dtype": "dtype",
    "quantization": "quantization",
    "kv_cache_dtype": "kv_cache_dtype",
    "served_model_name": "served_model_name",
}
_CONFIG_BOOL = {"enforce_eager": "enforce_eager", "enable_prefix_caching": "enable_prefix_caching"}


_BRACKET_OR_COMMA = re.compile(r"[()\[\]{},]")


def _read_value(s: str, i: int) -> tuple[str, int]:
    """Read one top-level value starting at s[i]; return it and the index after it. The value
    ends at the first comma outside brackets; the regex skips to each bracket or comma at C speed
    (an engine-config line holds kilobytes of nested compilation config)."""
    n = len(s)
    if i < n and s[i] in "'\"":
        q = s[i]
        j = s.find(q, i + 1)
        j = n if j < 0 else j
        return s[i + 1 : j], j + 1
    depth = 0
    for m in _BRACKET_OR_COMMA.finditer(s, i):
        c = m[0]
        if c == ",":
            if depth <= 0:
                return s[i : m.start()].strip(), m.start()
        elif c in "([{":
            depth += 1
        elif depth <= 0:  # an unmatched close: the end of the list this value is the last of
            return s[i : m.start()].strip(), m.start()  # (V0's `… served_model_name=facebook/opt-125m)`)
        else:
            depth -= 1
    return s[i:].strip(), n


def config_pairs(s: str) -> dict[str, str]:
    """Top-level `key=value` pairs of an engine-config line (values may nest brackets)."""
    out: dict[str, str] = {}
    i, n = 0, min(len(s), 30000)
    s = s[:n]
    while i < n:
        m = _KEY.match(s, i)
        if m is None:
            j = s.find(", ", i)
            if j < 0:
                break
            i = j + 2
            continue
        value, i = _read_value(s, m.end())
        out.setdefault(m[1], value)
        while i < n and s[i] in ", ":
            i += 1
    return out


def _setting(name: str, raw: str, pos: int) -> Fact | None:
    printed = f"{name}={raw}"
    if raw in ("None", ""):
        return None
    if name in _CONFIG_INT:
        return (
            Fact("settings", _CONFIG_INT[name], int(raw), printed, 0, pos)
            if raw.isascii() and raw.isdigit() and len(raw) < 16  # isdigit() alone takes '²', int() does not
            else None
        )
    if name in _CONFIG_BOOL:
        return (
            Fact("settings", _CONFIG_BOOL[name], raw == "True", printed, 0, pos) if raw in ("True", "False") else None
        )
    value = raw[6:] if name == "dtype" and raw.startswith("torch.") else raw
    return Fact("settings", _CONFIG_STR[name], value, printed, 0, pos)


def engine_config(seg: str) -> list[Fact]:
    out: list[Fact] = []
    m = _CONFIG.search(seg)
    if m is None:
        return out
    p = m.start()
    out.append(Fact("mark", "config", True, pos=p))
    v = _ENGINE_VERSION.search(seg, max(0, p - 80))
    if v:
        out.append(Fact("version", "engine config line", v[1], pos=p))
    pairs = config_pairs(seg[m.end() :])
    if "version" in pairs:
        out.append(Fact("version", "engine config version=", pairs["version"].strip("v"), pos=p))
    for name, raw in pairs.items():
        if name in _CONFIG_INT or name in _CONFIG_STR or name in _CONFIG_BOOL:
            if name == "quantization" and raw == "None":
                out.append(Fact("settings", "quantization", "none", "quantization=None", 0, p))
                continue
            f = _setting(name, raw, p)
            if f is not None:
                out.append(f)
    return out


def api_version(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for pattern in (_API_VERSION, _SERVER_VERSION):
        for m in pattern.finditer(seg):
            out.append(Fact("mark", "api_version", True, pos=m.start()))
            out.append(Fact("version", "API server", m[1].rstrip(","), pos=m.start()))
    return out


# ---------------------------------------------------------------- non-default args
_ARGS = re.compile(r"non-default args: (\{.{0,20000}\})")
_ARG_PAIR = re.compile(r"'(\w{1,60})': ('[^']{0,500}'|[\w.+\-]{1,60})")
_ARG_SETTINGS = {
    "model": "model",
    "model_tag": "model",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "data_parallel_size": "data_parallel_size",
    "kv_cache_dtype": "kv_cache_dtype",
    "block_size": "block_size",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "enforce_eager": "enforce_eager",
    "quantization": "quantization",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "max_num_seqs": "max_num_seqs",
    "enable_prefix_caching": "enable_prefix_caching",
    "dtype": "dtype",
    "enable_expert_parallel": "enable_expert_parallel",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
}


def _plain(v: object) -> Value | None:
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**63:
            return str(v)
        return v
    return repr(v)[:500]


def _literal_dict(text: str) -> dict[str, Value | None]:
    try:
        parsed = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        parsed = None
    if isinstance(parsed, dict):
        return {str(k): _plain(v) for k, v in parsed.items()}
    out: dict[str, Value | None] = {}
    for m in _ARG_PAIR.finditer(text):
        raw = m[2]
        val: Value | None
        if raw.startswith("'"):
            val = raw[1:-1]
        elif raw in ("True", "False"):
            val = raw == "True"
        elif raw == "None":
            val = None
        else:
            try:
                val = int(raw) if raw.lstrip("-").isdigit() else float(raw)
            except ValueError:
                val = raw
        out.setdefault(m[1], val)
    return out


def non_default_args(seg: str) -> list[Fact]:
    m = _ARGS.search(seg)
    if m is None:
        return []
    p = m.start()
    args = _literal_dict(m[1])
    out = [Fact("mark", "args", True, pos=p), Fact("args", "non_default_args", "", pos=p, numbers=tuple(args.items()))]
    for key, value in args.items():
        name = _ARG_SETTINGS.get(key)
        if name is None or value is None or (name == "model" and key == "model_tag" and "model" in args):
            continue
        if isinstance(value, float) and value != value:
            continue
        out.append(Fact("settings", name, value, f"{key}={value!r}", 0, p))
    return out


# ---------------------------------------------------------------- simple settings
_MML = re.compile(r"Using max model len " + INT)
_ATTN_BLOCK = re.compile(r"Setting (?:attention|kv cache) block size to " + INT)
_CHUNKED = re.compile(r"max_num_batched_tokens=" + INT)
_AUTO_FIT = re.compile(r"Auto-fit max_model_len: reduced from " + INT + " to " + INT)


def simple_settings(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _MML.finditer(seg):
        out.append(count("settings", "max_model_len", m[1], m.start()))
    for m in _ATTN_BLOCK.finditer(seg):
        out.append(count("settings", "block_size", m[1], m.start()))
        out.append(count("engine", "block_size", m[1], m.start()))
    if "Chunked prefill" in seg:
        for m in _CHUNKED.finditer(seg):
            out.append(count("settings", "max_num_batched_tokens", m[1], m.start()))
    for m in _AUTO_FIT.finditer(seg):
        out.append(count("settings", "max_model_len", m[2], m.start()))
        msg = f"vLLM reduced max_model_len from {m[1]} to {m[2]} to fit the available KV cache memory"
        nums = (("max_model_len_requested", int(m[1])), ("max_model_len", int(m[2])))
        out.append(Fact("note", "auto_fit_max_model_len", msg, m[0], 0, m.start(), numbers=nums))
    return out


# ---------------------------------------------------------------- the V1 sampler's path
# `TopKTopPSampler.__init__` (vllm/v1/sample/ops/topk_topp_sampler.py) logs which top-k/top-p path the
# sampler takes, which decides the profile run's sampler peak (app.core.profile_run): FlashInfer's
# ("Using FlashInfer for top-p & top-k sampling.", @e66d787bc^ and @4dd49b06f) or PyTorch's native sort
# ("FlashInfer is not available. / FlashInfer is available, but it is not enabled. Falling back to the
# PyTorch-native implementation of top-p & top-k sampling." and "FlashInfer version >= 0.2.3 required.
# Falling back to default sampling implementation." @e66d787bc^; "FlashInfer top-p/top-k sampling not
# supported on compute capability …; falling back to PyTorch-native sampler." and "… disabled via
# VLLM_USE_FLASHINFER_SAMPLER=0; using PyTorch-native sampler." @4dd49b06f).
SAMPLER_NEEDLES = ("top-p & top-k sampling", "top-p/top-k sampling", "Falling back to default sampling")
_FLASHINFER_ON = "Using FlashInfer for top-p & top-k sampling"
_NATIVE = re.compile(
    r"PyTorch-native (?:implementation of top-p & top-k sampling|sampler)|"
    r"FlashInfer version >= [\d.]+ required\. Falling back to default sampling implementation"
)


def sampler_path(seg: str) -> list[Fact]:
    """engine.flashinfer_sampler as the log states it (see SAMPLER_NEEDLES)."""
    i = seg.find(_FLASHINFER_ON)
    if i >= 0:
        return [Fact("settings", "flashinfer_sampler", True, _FLASHINFER_ON, 0, i)]
    m = _NATIVE.search(seg)
    return [Fact("settings", "flashinfer_sampler", False, m[0], 0, m.start())] if m else []


# ---------------------------------------------------------------- VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
# `_get_and_verify_max_len` warns, instead of raising, on a max_model_len above the model's derived one
# when the variable is set: "%s Make sure the value is correct and within the model context size." with
# msg ending "This may lead to incorrect model outputs or CUDA errors." (vllm/config.py @825b04486, #7080,
# to vllm/config/__init__.py @1cb39dbcd), then `logger.warning_once("%s %s", msg, warning)` with the warning
# "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. ..." (@55602bb2e, #20904, to
# vllm/config/model.py @28be48fa9). Both msgs open "User-specified max_model_len (N) is greater than the
# derived max_model_len (KEY=L or model_max_length=M in model's config.json)."; the ValueError of an
# unset variable puts "To allow overriding this maximum" after it instead: not read.
LONG_LEN_NEEDLES = ("User-specified max_model_len",)
_LONG_LEN = re.compile(
    r"User-specified max_model_len \(\d{1,12}\) is greater than the derived max_model_len \([^()]{1,200}\)\. "
    r"(?:This may lead to incorrect model outputs or CUDA errors\. Make sure the value is correct|"
    r"VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution)"
)


def allow_long_max_model_len(seg: str) -> list[Fact]:
    """engine.allow_long_max_model_len: the warning vLLM logs only with VLLM_ALLOW_LONG_MAX_MODEL_LEN set."""
    m = _LONG_LEN.search(seg)
    return [Fact("settings", "allow_long_max_model_len", True, m[0], 0, m.start())] if m else []


# ---------------------------------------------------------------- the linear method's kernel
#: "Using <Kernel> for <LinearMethod>", logged when a quantized checkpoint's layers pick a kernel:
#: the method class names the quantization vLLM resolved (its `get_name()`). Sources, vLLM
#: @fa2a33b89^: quantization/gptq_marlin.py:385 (GPTQMarlinLinearMethod, "gptq_marlin"),
#: awq_marlin.py:436 ("awq_marlin"); @28be48fa9: auto_gptq.py:353 (AutoGPTQLinearMethod, "auto_gptq"),
#: compressed_tensors/schemes/*.py (CompressedTensorsWNA16 / W4A8Fp8 / W4A8Int, "compressed-tensors").
#: The "Using X for MXFP4/NVFP4/MXFP8 GEMM" lines name a format several methods share: not read.
KERNEL_NEEDLES = ("LinearMethod", "for CompressedTensors")
_KERNEL_LINE = re.compile(r"Using (\w{1,80}) for (GPTQMarlinLinearMethod|AWQMarlinLinearMethod|AutoGPTQLinearMethod|"
                          r"CompressedTensors\w{1,40})")
_METHOD_OF = {"GPTQMarlinLinearMethod": "gptq_marlin", "AWQMarlinLinearMethod": "awq_marlin",
              "AutoGPTQLinearMethod": "auto_gptq"}


def kernel_method(seg: str) -> list[Fact]:
    """settings.quantization_method: the quantization a kernel line's linear method belongs to."""
    m = _KERNEL_LINE.search(seg)
    if m is None:
        return []
    method = _METHOD_OF.get(m[2], "compressed-tensors")
    return [Fact("settings", "quantization_method", method, m[0], 0, m.start())]


# ---------------------------------------------------------------- start-up errors
_V0_MSL = re.compile(
    r"max seq len \(" + INT + r"\) is larger than the maximum number of tokens that can be stored in "
    r"KV cache \(" + CINT + r"\)"
)
_V1_MSL = re.compile(
    r"max seq len \(" + INT + r"\),? \(?" + N + r" ?GiB KV cache is needed, which is larger than the "
    r"available KV cache memory \(" + N + r" ?GiB\)"
)
_EST = re.compile(r"[Ee]stimated maximum model length is " + INT)
_NO_MEM = re.compile(r"No available memory for the cache blocks")
_OOM = re.compile(
    r"CUDA out of memory\. Tried to allocate " + N + r" ?(bytes|KiB|MiB|GiB)\. GPU (\d{1,3}) has a total capacity "
    r"of " + N + r" ?(bytes|KiB|MiB|GiB) of which " + N + r" ?(bytes|KiB|MiB|GiB) is free"
)
_OOM_BY_TORCH = re.compile(r"Of the allocated memory " + N + r" ?(bytes|KiB|MiB|GiB) is allocated by PyTorch")
_SCALE = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
_INIT = re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + N + r" ?s")


def errors(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _V0_MSL.finditer(seg):
        p = m.start()
        tokens = count("engine", "kv_tokens", m[2], p)
        out.append(count("settings", "max_model_len", m[1], p))
        out.append(tokens)
        msg = f"vLLM refused to start: max_model_len {m[1]} is larger than the {m[2]} tokens the KV cache can hold"
        nums = (("max_model_len", int(m[1])), ("kv_tokens", tokens.value))
        out.append(Fact("error", "max_seq_len_exceeds_kv", msg, m[0], 0, p, numbers=nums))
    for m in _V1_MSL.finditer(seg):
        p = m.start()
        needed = size("finding", "needed_kv_bytes", m[2], "GiB", p)
        avail = size("finding", "available_kv_bytes", m[3], "GiB", p)
        est = _EST.search(seg, m.end(), m.end() + 400)
        nums2: list[tuple[str, Value | None]] = [
            ("max_model_len", int(m[1])),
            ("needed_kv_bytes", needed.value),
            ("available_kv_bytes", avail.value),
            ("estimated_max_model_len", int(est[1]) if est else None),
        ]
        out.append(count("settings", "max_model_len", m[1], p))
        msg = (
            f"vLLM refused to start: one request of max_model_len {m[1]} needs {m[2]} GiB of KV cache but "
            f"only {m[3]} GiB is available" + (f"; the largest model length that fits is about {est[1]}" if est else "")
        )
        out.append(Fact("error", "max_seq_len_exceeds_kv", msg, m[0], 0, p, numbers=tuple(nums2)))
    for m in _NO_MEM.finditer(seg):
        msg = "vLLM refused to start: no memory is left for KV cache blocks after weights and activations"
        out.append(Fact("error", "no_kv_memory", msg, m[0], 0, m.start()))
    out += _oom(seg)
    for m in _INIT.finditer(seg):
        out.append(seconds("engine", "init_seconds", m[1], m.start()))
        out.append(Fact("mark", "init_done", True, pos=m.start()))
    return out


def _oom(seg: str) -> list[Fact]:
    """PyTorch's CUDA out-of-memory error (the message `c10/cuda/CUDACachingAllocator.cpp` formats): a
    start-up failure with the request, the card's total capacity and what was free, as printed."""
    out: list[Fact] = []
    for m in _OOM.finditer(seg):
        by_torch = _OOM_BY_TORCH.search(seg, m.end(), m.end() + 300)
        nums: list[tuple[str, Value | None]] = [
            ("tried_bytes", round(float(m[1]) * _SCALE[m[2]])),
            ("gpu", int(m[3])),
            ("total_capacity_bytes", round(float(m[4]) * _SCALE[m[5]])),
            ("free_bytes", round(float(m[6]) * _SCALE[m[7]])),
            ("allocated_by_pytorch_bytes", round(float(by_torch[1]) * _SCALE[by_torch[2]]) if by_torch else None),
        ]
        msg = (
            f"vLLM did not start: CUDA out of memory on GPU {m[3]} (tried to allocate {m[1]} {m[2]}; "
            f"{m[6]} {m[7]} of {m[4]} {m[5]} free)"
        )
        out.append(Fact("error", "cuda_out_of_memory", msg, m[0], 0, m.start(), numbers=tuple(nums)))
    return out
