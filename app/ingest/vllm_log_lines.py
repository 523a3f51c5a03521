"""Message extractors: one log message in, the facts it states out.

Each extractor is keyed by a cheap literal (`KEYWORDS`); the scanner only calls an extractor on
a line that contains its literal, so regexes run on a tiny fraction of a log. Extractors use
`finditer` so that two records glued on one physical line both count; every fact carries the
position of its match so the caller can find the process prefix that precedes it.

Formats and the vLLM source that prints them (VLLM-NOTES §1.10, §2.1; file:line @52a31ccec
unless a commit is named):
- weights: `Loading model weights took %.4f GB` (V0 worker/model_runner.py, ≤v0.10; V1 ≤v0.7.3),
  `Model loading took %.4f GB and` (82fbeae92, v0.8.0–0.8.2), `… GiB and` (2de411824, v0.8.3+),
  `… GiB memory and` (e5e9067e6; v1/worker/gpu_model_runner.py:5133), V2 runner `… %s GiB and`.
- V0 profiling: one line `Memory profiling results: [duration=…,] total_gpu_memory=…`
  (de4008e2a v0.6.4; 0cd3d9717), three lines `Memory profiling takes` / `the current vLLM
  instance can use total_gpu_memory (…) x gpu_memory_utilization (…) = …` / `model weights
  take …` (551603fef, v0.6.5 → V0 removal, worker/worker.py).
- blocks: `# GPU blocks: %d, # CPU blocks: %d` (≤v0.6.6), `# CUDA blocks` (ad34c0df0),
  `# cuda blocks` (238dfc8ac); `num_gpu_blocks is: N` (API server, v1/metrics/loggers.py).
- V1: `Available KV cache memory` (v1/worker/gpu_worker.py:467), `GPU KV cache size`,
  `Maximum concurrency for … tokens per request` (v1/core/kv_cache_utils.py:1733/1735), the
  combined one-line form (post-52a31ccec builds), CUDA-graph lines (gpu_model_runner.py:6366,
  6457; gpu_worker.py:482/499/620), the suggestion (gpu_worker.py:662; INFO with bytes in
  v0.10.2, DEBUG with GiB since 2c58742df), `kv_cache_memory_bytes` (gpu_worker.py:370ff),
  start-up errors (v1/worker/utils.py:414, kv_cache_utils.py:691/717ff).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from app.ingest.vllm_log_model import Value

GIB = 2**30
MIB = 2**20

# Numbers are bounded in length so float() can never overflow and int() never hits the
# digit limit, whatever the input.
N = r"(-?\d{1,12}(?:\.\d{1,10})?)"
INT = r"(\d{1,15})"
CINT = r"(\d{1,3}(?:,\d{3}){0,5}|\d{1,18})"


class Fact(NamedTuple):
    """One statement of a message (a NamedTuple: built hundreds of thousands of times).

    scope: "rank" (the printing process), "engine", "settings", "error" (a start-up error:
    field = code, value = message, numbers), "note" (an informational finding), "mark" (a
    run-level event), "clue" (version evidence: field = basis, value = "min|max_exclusive"),
    "version" (a stated version), "args" (the API server's non-default args in numbers).
    """

    scope: str
    field: str
    value: Value
    printed: str = ""
    tol: int | float = 0
    pos: int = 0
    starts: bool = False
    numbers: tuple[tuple[str, Value | None], ...] = ()


def _decimals(s: str) -> int:
    i = s.find(".")
    return 0 if i < 0 else len(s) - i - 1


def size(scope: str, name: str, s: str, unit: str, pos: int, starts: bool = False) -> Fact:
    """A byte size printed as `s` in `unit` (GiB, "GB" meaning GiB, MiB, "MB" meaning MiB, or bytes)."""
    scale = MIB if unit in ("MiB", "MB") else (1 if unit == "bytes" else GIB)
    value = round(float(s) * scale)
    tol = round(0.5 * 10 ** -_decimals(s) * scale) if scale != 1 else 0
    return Fact(scope, name, value, f"{s} {unit}", tol, pos, starts)


def seconds(scope: str, name: str, s: str, pos: int) -> Fact:
    return Fact(scope, name, float(s), s + " s", 0.5 * 10 ** -_decimals(s), pos)


def ratio(scope: str, name: str, s: str, pos: int) -> Fact:
    return Fact(scope, name, float(s), s, 0.5 * 10 ** -_decimals(s), pos)


def count(scope: str, name: str, s: str, pos: int) -> Fact:
    return Fact(scope, name, int(s.replace(",", "")), s, 0, pos)


def clue(basis: str, lo: str = "", hi: str = "", pos: int = 0) -> Fact:
    return Fact("clue", basis, f"{lo}|{hi}", pos=pos)


Extractor = Callable[[str], list[Fact]]

# ---------------------------------------------------------------- weights
# "MB" is the branch of vLLM PR #3120 (2024-02-29, bytes / 2**20 with two decimals: opt-125m's 250.5e6 fp16
# bytes print as 244.61); the merged code (385da2dae, model_runner.py) prints bytes / 2**30 as "%.4f GB".
_WEIGHTS_V0 = re.compile(r"Loading model weights took " + N + r" ?(GB|GiB|MB)")
_WEIGHTS_V1 = re.compile(r"Model loading took " + N + r" ?(GB|GiB)( memory)? and " + N + r" s")


def weights(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _WEIGHTS_V0.finditer(seg):
        out.append(size("rank", "weights_bytes", m[1], m[2], m.start(), starts=True))
        out.append(clue("'Loading model weights took … GB' (V0 ≤0.10, V1 ≤0.7.3)", "", "0.11.0", m.start()))
    for m in _WEIGHTS_V1.finditer(seg):
        out.append(size("rank", "weights_bytes", m[1], m[2], m.start(), starts=True))
        out.append(seconds("rank", "weights_load_seconds", m[4], m.start()))
        if m[2] == "GB":
            out.append(clue("'Model loading took … GB and' (82fbeae92)", "0.8.0", "0.8.3", m.start()))
        elif m[3]:
            out.append(clue("'Model loading took … GiB memory and' (e5e9067e6)", "0.11.1", "", m.start()))
        elif _decimals(m[1]) == 4:
            out.append(clue("'Model loading took %.4f GiB and' (2de411824)", "0.8.3", "0.11.1", m.start()))
    return out


# ---------------------------------------------------------------- V0 profiling
_V0_ONE = re.compile(
    r"Memory profiling results: (?:duration=" + N + r" seconds, )?total_gpu_memory=" + N + r"GiB,? "
    r"initial_memory_usage=" + N + r"GiB,? peak_torch_memory=" + N + r"GiB,? "
    r"(?:memory_usage_post_profile=" + N + r"GiB,? )?non_torch_memory=" + N + r"GiB,? "
    r"kv_cache_size=" + N + r"GiB,? gpu_memory_utilization=" + N
)
_V0_TAKES = re.compile(r"Memory profiling takes " + N + r" seconds")
_V1_DEBUG_PROFILE = re.compile(
    r"Total non KV cache memory: "
    + N
    + r" ?GiB; torch peak memory increase: "
    + N
    + r" ?GiB; non-torch forward increase memory: "
    + N
    + r" ?GiB; weights memory: "
    + N
    + r" ?GiB"
)
_V0_BUDGET = re.compile(
    r"total_gpu_memory \(" + N + r" ?GiB\) x gpu_memory_utilization \(" + N + r"\) = " + N + r" ?GiB"
)
_V0_SPLIT = re.compile(
    r"model weights take " + N + r" ?GiB; non_torch_memory takes " + N + r" ?GiB; PyTorch activation "
    r"peak memory takes " + N + r" ?GiB; the rest of the memory reserved for KV Cache is " + N + r" ?GiB"
)


def v0_profile(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _V0_ONE.finditer(seg):
        p = m.start()
        if m[1]:
            out.append(seconds("rank", "profile_seconds", m[1], p))
            out.append(clue("V0 'Memory profiling results: duration=' (0cd3d9717)", "0.6.4", "0.6.6", p))
        else:
            out.append(clue("V0 one-line 'Memory profiling results' (de4008e2a)", "0.6.4", "0.6.5", p))
        out.append(size("rank", "total_bytes", m[2], "GiB", p))
        out.append(size("rank", "initial_usage_bytes", m[3], "GiB", p))
        out.append(size("rank", "peak_torch_bytes", m[4], "GiB", p))
        if m[5]:
            out.append(size("rank", "post_profile_usage_bytes", m[5], "GiB", p))
        out.append(size("rank", "non_torch_bytes", m[6], "GiB", p))
        out.append(size("rank", "kv_bytes", m[7], "GiB", p, starts=True))
        out.append(ratio("settings", "gpu_memory_utilization", m[8], p))
    for m in _V0_TAKES.finditer(seg):
        out.append(seconds("rank", "profile_seconds", m[1], m.start()))
    for m in _V1_DEBUG_PROFILE.finditer(seg):
        p = m.start()
        out.append(size("rank", "non_kv_bytes", m[1], "GiB", p))
        out.append(size("rank", "activation_bytes", m[2], "GiB", p))
        out.append(size("rank", "non_torch_bytes", m[3], "GiB", p))
        out.append(size("rank", "weights_bytes", m[4], "GiB", p))
    for m in _V0_BUDGET.finditer(seg):
        p = m.start()
        out.append(size("rank", "total_bytes", m[1], "GiB", p))
        out.append(ratio("settings", "gpu_memory_utilization", m[2], p))
        out.append(size("rank", "requested_bytes", m[3], "GiB", p))
        out.append(clue("three-line V0 profiling block (551603fef)", "0.6.5", "0.11.0", p))
    for m in _V0_SPLIT.finditer(seg):
        p = m.start()
        out.append(size("rank", "weights_bytes", m[1], "GiB", p))
        out.append(size("rank", "non_torch_bytes", m[2], "GiB", p))
        out.append(size("rank", "activation_bytes", m[3], "GiB", p))
        out.append(size("rank", "kv_bytes", m[4], "GiB", p, starts=True))
    return out


# The table a dev build of 2024-12 printed (`Memory profiling results:` then one field per line,
# each line with its own prefix): the review variant of vLLM PR #10511 before it was merged as
# the three-line block (551603fef). Seen in a real log of 2024-12-13 (tests/data/vllm-logs/public/01).
# A second variant (vLLM PR #11120's branch, 2024-12-11, public/29) prints `target_allocation`
# (total × utilization), `baseline_memory` (what the process held before the profile run: weights
# and non-torch memory together, not split), `max_inference_spike` (the profile run's peak above
# the baseline: the activation row) and `kv_cache_size` (= target − baseline − spike).
_TABLE_ROW = re.compile(
    r"(?:^|\] |\) )(duration|total_gpu_memory|gpu_memory_utilization|the current vLLM instance can use|"
    r"model weights take|non_torch_memory|PyTorch activation peak memory|available_kv_cache_memory|"
    r"target_allocation|baseline_memory|max_inference_spike|kv_cache_size)"
    r"[ \t]+" + N + r" ?(GiB|seconds)?[ \t]*$"
)
_TABLE_FIELDS = {
    "total_gpu_memory": "total_bytes",
    "the current vLLM instance can use": "requested_bytes",
    "model weights take": "weights_bytes",
    "non_torch_memory": "non_torch_bytes",
    "PyTorch activation peak memory": "activation_bytes",
    "available_kv_cache_memory": "kv_bytes",
    "target_allocation": "requested_bytes",
    "baseline_memory": "baseline_bytes",
    "max_inference_spike": "activation_bytes",
    "kv_cache_size": "kv_bytes",
}
_TABLE_KV = frozenset({"available_kv_cache_memory", "kv_cache_size"})
TABLE_NEEDLES = (*(f"{k} " for k in _TABLE_FIELDS), "duration ", "gpu_memory_utilization ")


def v0_profile_table(seg: str) -> list[Fact]:
    """One row of the table; the header line itself only marks the version."""
    if "Memory profiling results:" in seg and seg.rstrip().endswith("results:"):
        basis = "'Memory profiling results:' table, one field per line (PR #10511 review build)"
        return [Fact("mark", "profile_table", True), clue(basis, "0.6.4", "0.6.6")]
    m = _TABLE_ROW.search(seg)
    if m is None:
        return []
    p, field = m.start(1), m[1]
    if field == "duration":
        return [seconds("rank", "profile_seconds", m[2], p)] if m[3] == "seconds" else []
    if field == "gpu_memory_utilization":
        return [ratio("settings", "gpu_memory_utilization", m[2], p)] if m[3] is None else []
    if m[3] != "GiB":
        return []
    return [size("rank", _TABLE_FIELDS[field], m[2], "GiB", p, starts=field in _TABLE_KV)]


# ---------------------------------------------------------------- blocks, tokens, concurrency
_BLOCKS = re.compile(
    r"(?:# )?(GPU|CUDA|cuda|XPU|xpu|HPU|hpu|NPU|npu|TPU|tpu) blocks: " + INT + r"(?:, # CPU blocks: " + INT + ")?"
)
_BLOCKS_CLUE = {
    "GPU": ("'# GPU blocks' (≤0.6.6 V0, 0.7.0–0.7.2 V1)", "", "0.7.3"),
    "CUDA": ("'# CUDA blocks' (ad34c0df0)", "0.7.0", "0.7.3"),
    "cuda": ("'# cuda blocks' (238dfc8ac)", "0.7.3", "0.11.0"),
}
_NUM_BLOCKS_FINAL = re.compile(r"num_gpu_blocks is: " + INT)
_OVERRIDE = re.compile(r"Overriding num_gpu_blocks=" + INT + r" with num_gpu_blocks_override=" + INT)


def blocks(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _BLOCKS.finditer(seg):
        out.append(count("engine", "num_gpu_blocks", m[2], m.start()))
        if m[3]:
            out.append(count("engine", "num_cpu_blocks", m[3], m.start()))
        c = _BLOCKS_CLUE.get(m[1])
        if c:
            out.append(clue(c[0], c[1], c[2], m.start()))
    for m in _NUM_BLOCKS_FINAL.finditer(seg):
        out.append(count("engine", "num_gpu_blocks_final", m[1], m.start()))
    for m in _OVERRIDE.finditer(seg):
        if _is_graph_profiling_override(m[1]):
            continue
        out.append(count("engine", "num_gpu_blocks_profiled", m[1], m.start()))
        out.append(count("engine", "num_gpu_blocks_final", m[2], m.start()))
    return out


def _is_graph_profiling_override(profiled: str) -> bool:
    """'Overriding num_gpu_blocks=0 with num_gpu_blocks_override=N' is the CUDA-graph memory profile's
    minimal KV cache, not the engine's.

    `GPUModelRunner._init_minimal_kv_cache_for_profiling` (vllm/v1/worker/gpu_model_runner.py, since
    ebb9cc5f2, PR #30515, 2026-03-07; @4dd49b06f, v0.19) sets `num_gpu_blocks_override` to
    max_cudagraph_capture_size and calls `get_kv_cache_config_from_groups(available_memory=0)`, whose
    override branch (vllm/v1/core/kv_cache_utils.py) logs the line with 0 profiled blocks. The engine's
    own sizing (`get_kv_cache_configs`) raises "No available memory for the cache blocks" for
    available memory <= 0 before it gets there, so an engine override never prints 0 profiled blocks.
    """
    return int(profiled.replace(",", "")) == 0


_KV_AVAILABLE = re.compile(r"Available KV cache memory: " + N + r" ?GiB")
_KV_TOKENS = re.compile(r"GPU KV cache size: " + CINT + r" tokens(, Maximum concurrency)?")
_CONCURRENCY = re.compile(r"Maximum concurrency for " + CINT + r" tokens per request: " + N + r" ?x")


def kv_available(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _KV_AVAILABLE.finditer(seg):
        out.append(size("rank", "kv_bytes", m[1], "GiB", m.start(), starts=True))
        out.append(clue("'Available KV cache memory' (cc867be19)", "0.9.1", "", m.start()))
    return out


def kv_tokens(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _KV_TOKENS.finditer(seg):
        out.append(count("engine", "kv_tokens", m[1], m.start()))
        if m[2]:
            out.append(clue("combined 'GPU KV cache size …, Maximum concurrency' line (post 52a31ccec)", "0.21.0"))
        else:
            out.append(clue("'GPU KV cache size' (d3ea50113)", "0.7.3", "", m.start()))
    return out


def concurrency(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _CONCURRENCY.finditer(seg):
        p = m.start()
        out.append(count("engine", "max_concurrency_tokens", m[1], p))
        out.append(Fact("engine", "max_concurrency", float(m[2]), m[2] + "x", 0.5 * 10 ** -_decimals(m[2]), p))
        out.append(count("settings", "max_model_len", m[1], p))
    return out


# ---------------------------------------------------------------- CUDA graphs
_CAPTURE = re.compile(r"Graph capturing finished in " + N + r" secs?(?:, took " + N + r" ?GiB)?")
_CG_ESTIMATE = re.compile(r"Estimated CUDA graph memory: " + N + r" ?GiB total")
_CG_MODE = re.compile(
    r"Estimated (\w{1,20}) CUDA graph memory: " + N + r" ?MiB first-capture \+ \(" + INT + r" ?- ?1\) × " + N
)
_CG_POOL = re.compile(r"CUDA graph pool memory: " + N + r" ?GiB \(actual\), " + N + r" ?GiB \(estimated\)")
_CG_ON = re.compile(
    # v0.21+ "(default since v0.21.0)"; the opt-in builds before it (public/31, 32: main of 2026-03) say
    # "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1). This will become the default in v0.19."
    r"CUDA graph memory profiling is enabled( \(default since v0\.21\.0\))?"
    r"(?: \(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1\)\. This will become the default in v[\d.]{1,8}?)?"
    r"\. The current "
    r"--gpu-memory-utilization="
    + N
    + r" is equivalent to --gpu-memory-utilization="
    + N
    + r" without CUDA graph memory profiling\..{0,300}?increase --gpu-memory-utilization to "
    + N
)
# Off: "… is disabled …" (v0.21+ with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0), or the opt-in builds'
# "In v0.19, CUDA graph memory profiling will be enabled by default … increase --gpu-memory-utilization
# from X to Y" (public/31, main of 2026-03: the estimate is printed but not subtracted).
_CG_OFF = re.compile(
    r"CUDA graph memory profiling (?:is disabled|will be enabled by default).{0,500}?increas(?:ing|e) "
    r"--gpu-memory-utilization from " + N + " to " + N
)


def _free_memory_rose(printed: str, pos: int) -> Fact:
    """'Graph capturing finished in N secs, took -0.22 GiB': not a pool size.

    The figure is `start_free_gpu_memory - end_free_gpu_memory`, two device-wide `mem_get_info()` reads
    around the capture (`GPUModelRunner.capture_model`, vllm/v1/worker/gpu_model_runner.py @9ae3c55b1,
    v0.12; the same at @4dd49b06f, v0.19), so it goes negative when more memory is freed on the device
    during the capture than the graphs take (public/74, 75). A pool cannot be negative: the rank's graph
    row is left unmeasured and the printed delta is kept in a finding.
    """
    delta = size("note", "graph_capture_free_memory_rose", printed, "GiB", pos)
    msg = (
        f"'Graph capturing finished … took {printed} GiB': free device memory rose during the capture, so the "
        "line does not measure the CUDA-graph pool (the row is left unmeasured)"
    )
    return Fact("note", delta.field, msg, delta.printed, 0, pos, numbers=(("free_memory_delta_bytes", delta.value),))


def cuda_graphs(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _CAPTURE.finditer(seg):
        out.append(seconds("rank", "graph_capture_seconds", m[1], m.start()))
        if m[2] and float(m[2]) < 0:
            out.append(_free_memory_rose(m[2], m.start()))
        elif m[2]:
            out.append(size("rank", "cuda_graph_bytes", m[2], "GiB", m.start()))
        else:
            out.append(clue("'Graph capturing finished' without size (≤0.6.3)", "", "0.6.4", m.start()))
    for m in _CG_ESTIMATE.finditer(seg):
        out.append(size("rank", "cuda_graph_estimate_bytes", m[1], "GiB", m.start()))
        out.append(Fact("mark", "cg_estimate", True, pos=m.start()))
    for m in _CG_MODE.finditer(seg):
        mode = m[1].lower()
        out.append(size("rank", f"cuda_graph_estimate_{mode}_first_bytes", m[2], "MiB", m.start()))
        out.append(size("rank", f"cuda_graph_estimate_{mode}_per_graph_bytes", m[4], "MiB", m.start()))
        out.append(count("rank", f"cuda_graph_estimate_{mode}_graphs", m[3], m.start()))
    for m in _CG_POOL.finditer(seg):
        out.append(size("rank", "cuda_graph_bytes", m[1], "GiB", m.start()))
        out.append(size("rank", "cuda_graph_estimate_bytes", m[2], "GiB", m.start()))
        out.append(Fact("mark", "cg_estimate", True, pos=m.start()))
    for m in _CG_ON.finditer(seg):
        p = m.start()
        out.append(ratio("settings", "gpu_memory_utilization", m[2], p))
        out.append(ratio("rank", "hint_gpu_memory_utilization", m[2], p))
        out.append(ratio("rank", "util_equivalent_without_cg", m[3], p))
        out.append(ratio("rank", "util_suggested", m[4], p))
        out.append(Fact("mark", "cg_enabled", True, pos=p))
        if m[1]:
            out.append(clue("CUDA-graph util-equivalence hint '(default since v0.21.0)' (96a85c575)", "0.21.0"))
    for m in _CG_OFF.finditer(seg):
        out.append(ratio("settings", "gpu_memory_utilization", m[1], m.start()))
        out.append(ratio("rank", "util_suggested", m[2], m.start()))
        out.append(Fact("mark", "cg_disabled", True, pos=m.start()))
    return out


# ---------------------------------------------------------------- free memory / suggestion / manual KV
_SUGGEST = re.compile(
    r"Free memory on device (?:[\w:]{1,16} )?\(" + N + "/" + N + r" ?GiB\) on startup\. Desired GPU memory "
    r"utilization is \(" + N + ", " + N + r" ?GiB\)\. Actual usage is "
)
_USAGE_OLD = re.compile(
    N
    + r" ?GiB for weight, "
    + N
    + r" ?GiB for peak activation, "
    + N
    + r" ?GiB for non-torch memory, and "
    + N
    + r" ?GiB for CUDAGraph memory"
)
_USAGE_NEW = re.compile(
    N
    + r" ?GiB for consumed memory \(weights \+ non-torch\), "
    + N
    + r" ?GiB for peak activation, and "
    + N
    + r" ?GiB for CUDAGraph memory"
)
_SUGGEST_KV = re.compile(r"--kv-cache-memory=" + INT + r"`?(?: \(" + N + r" ?GiB\))? to (fit|fully)")
_IN_USE = re.compile(r"Current kv cache memory in use is " + N + r" ?(bytes|GiB)")
_FREE_ERROR = re.compile(
    r"Free memory on device (?:([\w:]{1,16}) )?\(" + N + "/" + N + r" ?GiB\) on startup is less than desired "
    r"GPU memory utilization \(" + N + ", " + N + r" ?GiB\)"
)
_MANUAL_KV = re.compile(
    r"Initial free memory " + N + r" ?GiB, reserved " + N + r" ?GiB memory for KV Cache as specified by "
    r"kv_cache_memory_bytes"
)
_AFTER_PROFILE = re.compile(
    r"Free memory after profiling: " + N + r" ?GiB \(total\), " + N + r" ?GiB \(within requested\)"
)
_DEBUG_FREE = re.compile(r"Initial free memory: " + N + r" ?GiB; Requested memory: " + N + r" \(util\), " + N)


def free_memory(seg: str) -> list[Fact]:
    out: list[Fact] = []
    for m in _SUGGEST.finditer(seg):
        p = m.start()
        out.append(size("rank", "free_at_start_bytes", m[1], "GiB", p))
        out.append(size("rank", "total_bytes", m[2], "GiB", p))
        out.append(ratio("settings", "gpu_memory_utilization", m[3], p))
        out.append(size("rank", "requested_bytes", m[4], "GiB", p))
        tail = seg[m.end() : m.end() + 1500]
        u = _USAGE_OLD.match(tail)
        if u:
            out.append(size("rank", "weights_bytes", u[1], "GiB", p))
            out.append(size("rank", "activation_bytes", u[2], "GiB", p))
            out.append(size("rank", "non_torch_bytes", u[3], "GiB", p))
            out.append(size("rank", "cuda_graph_bytes", u[4], "GiB", p))
        u = _USAGE_NEW.match(tail)
        if u:
            out.append(size("rank", "consumed_bytes", u[1], "GiB", p))
            out.append(size("rank", "activation_bytes", u[2], "GiB", p))
            out.append(size("rank", "cuda_graph_bytes", u[3], "GiB", p))
        for s in _SUGGEST_KV.finditer(tail):
            name = "suggested_kv_bytes_requested" if s[3] == "fit" else "suggested_kv_bytes_full"
            out.append(Fact("rank", name, int(s[1]), s[1], 0, p))
        i = _IN_USE.search(tail)
        if i:
            out.append(size("rank", "kv_bytes", i[1], i[2], p))
            out.append(size("rank", "kv_in_use_bytes", i[1], i[2], p))
            if i[2] == "bytes":
                out.append(clue("INFO suggestion with '… in use is N bytes' (94e6b2d55)", "0.10.2", "0.11.0", p))
    for m in _FREE_ERROR.finditer(seg):
        p = m.start()
        facts = [
            size("rank", "free_at_start_bytes", m[2], "GiB", p),
            size("rank", "total_bytes", m[3], "GiB", p),
            ratio("settings", "gpu_memory_utilization", m[4], p),
            size("rank", "requested_bytes", m[5], "GiB", p),
        ]
        out.extend(facts)
        nums: tuple[tuple[str, Value | None], ...] = (
            ("device", m[1]),
            ("free_at_start_bytes", facts[0].value),
            ("total_bytes", facts[1].value),
            ("gpu_memory_utilization", facts[2].value),
            ("requested_bytes", facts[3].value),
        )
        msg = (
            f"vLLM refused to start: free memory at startup ({m[2]} GiB of {m[3]} GiB) is below the "
            f"requested budget gpu_memory_utilization {m[4]} × total = {m[5]} GiB"
        )
        out.append(Fact("error", "free_memory_below_utilization", msg, m[0], 0, p, numbers=nums))
    for m in _MANUAL_KV.finditer(seg):
        p = m.start()
        out.append(size("rank", "free_at_start_bytes", m[1], "GiB", p))
        out.append(size("rank", "kv_bytes", m[2], "GiB", p, starts=True))
        out.append(size("settings", "kv_cache_memory_bytes", m[2], "GiB", p))
        out.append(Fact("mark", "kv_manual", True, pos=p))
        out.append(clue("'kv_cache_memory_bytes … skipped memory profiling' (94e6b2d55)", "0.10.2", "", p))
    for m in _AFTER_PROFILE.finditer(seg):
        out.append(size("rank", "free_after_profile_bytes", m[1], "GiB", m.start()))
        out.append(size("rank", "free_within_requested_bytes", m[2], "GiB", m.start()))
    for m in _DEBUG_FREE.finditer(seg):
        p = m.start()
        out.append(size("rank", "free_at_start_bytes", m[1], "GiB", p))
        out.append(ratio("settings", "gpu_memory_utilization", m[2], p))
        out.append(size("rank", "requested_bytes", m[3], "GiB", p))
    return out
