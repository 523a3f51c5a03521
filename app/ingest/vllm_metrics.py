"""vLLM's Prometheus `/metrics` text (and DCGM exporter's) read with prometheus_client's parser.

Metric names are vLLM's own, from `PrometheusStatLogger` in vllm/v1/metrics/loggers.py (commit
28be48fa944d, 2026-05-24): `vllm:cache_config_info` (every `CacheConfig` field as a label, from
`CacheConfig.metrics_info` in vllm/config/cache.py: num_gpu_blocks, block_size, cache_dtype,
gpu_memory_utilization, kv_cache_memory_bytes, …), `vllm:kv_cache_usage_perc`,
`vllm:num_preemptions` (a counter, `_total` on the wire), `vllm:request_prompt_tokens` and
`vllm:request_generation_tokens` (histograms), `vllm:num_requests_running/waiting`; labels
`model_name` and `engine`. `vllm:gpu_cache_usage_perc` (and `vllm:num_preemptions_total` as a
gauge name) are the names before commit 9cf4edae6 (2025-11-25, "Scheduled removal of deprecated
metrics"); both are read. DCGM exporter's `DCGM_FI_DEV_FB_FREE` / `DCGM_FI_DEV_FB_USED` /
`DCGM_FI_DEV_FB_RESERVED` are MiB per `gpu` label: the nvidia-smi equivalent.

Series are grouped per replica: the `instance`, `pod`, `replica` and `engine` labels a series has
(vLLM's data-parallel engines each carry their own `engine` index).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from app.core.errors import InputError
from app.core.sim.io import MAX_TOKENS
from app.core.units import MIB

REPLICA_LABELS = ("instance", "pod", "replica", "engine")
_SAMPLE = re.compile(r"^[A-Za-z_:][A-Za-z0-9_:]*(\{.*\})?\s+\S+(\s+\S+)?\s*$")
EXPECTED = ("expected the text of a vLLM engine's /metrics endpoint (series named vllm:…, e.g. "
            "vllm:cache_config_info, vllm:kv_cache_usage_perc) or DCGM exporter metrics (DCGM_FI_DEV_FB_FREE)")
MAX_SAMPLES = 1000  # lengths in a measured mix handed to the simulator


@dataclass
class Histogram:
    buckets: dict[float, float] = field(default_factory=dict)  # le → cumulative count (summed over LoRA names)
    total: float = 0.0
    count: float = 0.0


@dataclass
class Replica:
    key: dict[str, str]
    model_names: list[str] = field(default_factory=list)
    cache_config: dict[str, str] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, Histogram] = field(default_factory=dict)


@dataclass
class DcgmGpu:
    gpu: str
    labels: dict[str, str]
    mib: dict[str, float] = field(default_factory=dict)


@dataclass
class MetricsReading:
    replicas: dict[tuple[tuple[str, str], ...], Replica] = field(default_factory=dict)
    gpus: dict[str, DcgmGpu] = field(default_factory=dict)
    skipped_lines: list[int] = field(default_factory=list)
    vllm_series: int = 0
    #: samples read but not used, each with why (a value no measurement can have)
    refused: list[dict[str, str]] = field(default_factory=list)


def _clean(text: str) -> tuple[str, list[int]]:
    """Drop lines that are neither Prometheus comments nor samples (shell prompts, wrapped text)."""
    kept: list[str] = []
    skipped: list[int] = []
    for n, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            if stripped.startswith(("# HELP ", "# TYPE ")):
                kept.append(stripped)
            continue
        if _SAMPLE.match(stripped):
            kept.append(stripped)
        else:
            skipped.append(n)
    return "\n".join(kept) + "\n", skipped


_GAUGES = {
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:num_preemptions_total": "preemptions",
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:prompt_tokens_total": "prompt_tokens_total",
    "vllm:generation_tokens_total": "generation_tokens_total",
}
_HISTOGRAMS = {"vllm:request_prompt_tokens": "prompt_tokens", "vllm:request_generation_tokens": "output_tokens"}
_DCGM = {"DCGM_FI_DEV_FB_FREE": "free", "DCGM_FI_DEV_FB_USED": "used", "DCGM_FI_DEV_FB_RESERVED": "reserved"}


def parse_metrics(text: str, where: str = "metrics") -> MetricsReading:
    """Every vLLM and DCGM series in `text`; InputError naming what was expected when there is none."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(where, f"empty input; {EXPECTED}")
    cleaned, skipped = _clean(text)
    reading = MetricsReading(skipped_lines=skipped)
    try:
        for family in text_string_to_metric_families(cleaned):
            for sample in family.samples:
                _take(reading, sample.name, dict(sample.labels), float(sample.value))
    except ValueError as exc:
        raise InputError(where, f"not Prometheus text ({exc}); {EXPECTED}") from None
    if reading.vllm_series == 0 and not reading.gpus:
        raise InputError(where, f"no vLLM or DCGM series found; {EXPECTED}")
    return reading


def _replica(reading: MetricsReading, labels: dict[str, str]) -> Replica:
    key = tuple((k, labels[k]) for k in REPLICA_LABELS if k in labels)
    rep = reading.replicas.get(key)
    if rep is None:
        rep = reading.replicas[key] = Replica(dict(key))
    name = labels.get("model_name")
    if name and name not in rep.model_names:
        rep.model_names.append(name)  # the served model, then any LoRA adapter names
    return rep


#: cache_config_info labels read as numbers: (lowest, highest, whole number)
_CONFIG_NUMBERS: dict[str, tuple[float, float, bool]] = {
    "num_gpu_blocks": (0, 2**53, True), "block_size": (1, 2**20, True),
    "kv_cache_memory_bytes": (0, 2**60, True), "num_gpu_blocks_override": (0, 2**53, True),
    "gpu_memory_utilization": (0, 1, False),
}


_MAX_VALUE = 2**53  # the largest whole number a float (and a browser) holds exactly


def _series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}}" if inner else name


def _refuse(reading: MetricsReading, name: str, labels: dict[str, str], value: str, reason: str) -> None:
    reading.refused.append({"series": _series(name, labels), "value": value, "reason": reason})


def _number_refusal(value: float, lo: float, hi: float, whole: bool) -> str | None:
    if not math.isfinite(value):
        return "not a finite number"
    if value < lo or value > hi:
        return f"outside {lo:g} … {hi:g}"
    if whole and value != int(value):
        return "not a whole number"
    return None


def _sample_refusal(name: str, labels: dict[str, str], value: float) -> str | None:
    """Why a sample cannot be the measurement its series names (None: it can). Every series read is
    a count, MiB, token length or fraction: finite and not negative; a usage fraction is at most 1;
    a histogram bucket's `le` is a token length (the simulator's range, or +Inf)."""
    if not math.isfinite(value):
        return "not a finite number"
    if value < 0:
        return "negative"
    if value > _MAX_VALUE:
        return f"larger than any count, MiB or token sum ({_MAX_VALUE:,})"
    if name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc") and value > 1:
        return "a fraction of the KV cache above 1"
    if name.endswith("_bucket"):
        le = labels.get("le")
        try:
            edge = float(le) if le is not None else math.nan
        except ValueError:
            edge = math.nan
        if le is not None and not (edge == math.inf or 0 <= edge <= MAX_TOKENS):
            return f"bucket edge le={le!r} is not a token length (0 … {MAX_TOKENS:,} or +Inf)"
    return None


def _config_labels(reading: MetricsReading, labels: dict[str, str]) -> dict[str, str]:
    """cache_config_info's labels, without a number label no engine can have (refused, named)."""
    out: dict[str, str] = {}
    for key, raw in labels.items():
        if key in REPLICA_LABELS:
            continue
        bound = _CONFIG_NUMBERS.get(key)
        if bound is not None and raw not in ("None", ""):
            try:
                why = _number_refusal(float(raw), *bound)
            except ValueError:
                why = "not a number"
            if why is not None:
                _refuse(reading, "vllm:cache_config_info", {key: raw}, raw, why)
                continue
        out[key] = raw
    return out


def _take(reading: MetricsReading, name: str, labels: dict[str, str], value: float) -> None:
    if name in _DCGM or (name.startswith("vllm:") and name != "vllm:cache_config_info"):
        why = _sample_refusal(name, labels, value)
        if why is not None:
            if name in _DCGM or name in _GAUGES or re.sub(r"_(bucket|sum|count)$", "", name) in _HISTOGRAMS:
                _refuse(reading, name, labels, repr(value), why)
            if name.startswith("vllm:"):
                reading.vllm_series += 1
            return
    if name in _DCGM:
        gpu = labels.get("gpu", str(len(reading.gpus)))
        key = f"{gpu}/{labels['GPU_I_ID']}" if labels.get("GPU_I_ID") else gpu  # a MIG instance
        reading.gpus.setdefault(key, DcgmGpu(gpu, labels)).mib[_DCGM[name]] = value
        return
    if not name.startswith("vllm:"):
        return
    reading.vllm_series += 1
    if name == "vllm:cache_config_info":
        _replica(reading, labels).cache_config = _config_labels(reading, labels)
    elif name in _GAUGES:
        _replica(reading, labels).values[_GAUGES[name]] = value
    elif (base := re.sub(r"_(bucket|sum|count)$", "", name)) in _HISTOGRAMS:  # typed or untyped text
        le = labels.pop("le", None)
        hist = _replica(reading, labels).histograms.setdefault(_HISTOGRAMS[base], Histogram())
        if name.endswith("_bucket") and le is not None:
            hist.buckets[float(le)] = hist.buckets.get(float(le), 0.0) + value
        elif name.endswith("_sum"):
            hist.total += value
        elif name.endswith("_count"):
            hist.count += value


def _int_label(config: dict[str, str], key: str) -> int | None:
    raw = config.get(key)
    try:
        return int(float(raw)) if raw not in (None, "None", "") else None
    except ValueError:
        return None


def _float_label(config: dict[str, str], key: str) -> float | None:
    raw = config.get(key)
    try:
        return float(raw) if raw not in (None, "None", "") else None
    except ValueError:
        return None


def length_mix(hist: Histogram, limit: int = MAX_SAMPLES) -> dict[str, Any] | None:
    """A histogram as lengths for the simulator: each finite bucket at its upper edge (`le`, the
    conservative end for KV), the `+Inf` bucket at the mean the histogram's sum leaves for it,
    scaled to at most `limit` lengths by largest remainders."""
    if not hist.buckets:
        return None
    count = hist.count if hist.count > 0 else max(hist.buckets.values())  # an excerpt without _count
    if count <= 0:
        return None
    counts: list[tuple[int, float]] = []
    previous, finite_sum = 0.0, 0.0
    note: str | None = None
    for le, cumulative in sorted(hist.buckets.items()):
        n = max(cumulative - previous, 0.0)
        previous = max(previous, cumulative)
        if n <= 0:
            continue
        if math.isinf(le):
            finite_edge = max((b for b in hist.buckets if not math.isinf(b)), default=1.0)
            tail = (hist.total - finite_sum) / n if hist.total > finite_sum else finite_edge
            if tail > MAX_TOKENS:  # a sum no lengths of these buckets add up to: the +Inf bucket's edge
                note = f"the histogram's sum leaves {tail:,.0f} tokens a request in +Inf: not a length, not used"
                tail = finite_edge
            counts.append((min(max(round(tail), int(finite_edge) + 1), MAX_TOKENS), n))
        else:
            counts.append((max(int(le), 1), n))
            finite_sum += le * n
    if not counts:
        return None
    total = sum(n for _, n in counts)
    size = min(limit, round(total)) or 1
    exact = [(length, n * size / total) for length, n in counts]
    taken = [(length, int(share)) for length, share in exact]
    rest = size - sum(k for _, k in taken)
    order = sorted(range(len(exact)), key=lambda i: exact[i][1] - taken[i][1], reverse=True)
    for i in order[:rest]:
        taken[i] = (taken[i][0], taken[i][1] + 1)
    lengths = [length for length, k in taken for _ in range(k)]
    return {"lengths": lengths, "requests": round(count),
            "mean_tokens": hist.total / hist.count if hist.count > 0 and hist.total > 0 else None,
            "rule": "finite buckets at their upper edge (le); +Inf at the mean the histogram's sum leaves",
            "note": note}


def replica_json(rep: Replica) -> dict[str, Any]:
    cfg = rep.cache_config
    out: dict[str, Any] = {
        "replica": rep.key,
        "model_name": rep.model_names[0] if rep.model_names else None,
        "model_names": list(rep.model_names),
        "num_gpu_blocks": _int_label(cfg, "num_gpu_blocks"),
        "block_size": _int_label(cfg, "block_size"),
        "cache_dtype": cfg.get("cache_dtype"),
        "gpu_memory_utilization": _float_label(cfg, "gpu_memory_utilization"),
        "kv_cache_memory_bytes": _int_label(cfg, "kv_cache_memory_bytes"),
        "num_gpu_blocks_override": _int_label(cfg, "num_gpu_blocks_override"),
        "enable_prefix_caching": cfg.get("enable_prefix_caching"),
        "cache_config": dict(cfg),
    }
    out.update({k: rep.values.get(k) for k in ("kv_cache_usage", "preemptions", "requests_running",
                                               "requests_waiting")})
    blocks, usage = out["num_gpu_blocks"], out["kv_cache_usage"]
    out["blocks_in_use"] = None if blocks is None or usage is None else round(blocks * usage)
    out["length_mix"] = {k: length_mix(h) for k, h in rep.histograms.items()}
    return out


def dcgm_json(gpu: DcgmGpu) -> dict[str, Any]:
    """A GPU as nvidia-smi would show it (bytes): total = free + used (+ reserved, newer DCGM)."""
    free, used, reserved = (gpu.mib.get(k) for k in ("free", "used", "reserved"))
    total = None if free is None or used is None else free + used + (reserved or 0.0)

    def as_bytes(v: float | None) -> int | None:
        return None if v is None else int(v * MIB)

    labels = gpu.labels
    return {"index": int(gpu.gpu) if gpu.gpu.isdecimal() and len(gpu.gpu) < 8 else None, "gpu": gpu.gpu,
            "mig_instance": labels.get("GPU_I_ID"), "mig_profile": labels.get("GPU_I_PROFILE"),
            "name": labels.get("modelName"), "uuid": labels.get("UUID"),
            "hostname": labels.get("Hostname") or labels.get("hostname"), "total_bytes": as_bytes(total),
            "used_bytes": as_bytes(used), "free_bytes": as_bytes(free), "reserved_bytes": as_bytes(reserved)}


def metrics_to_json(reading: MetricsReading) -> dict[str, Any]:
    return {"replicas": [replica_json(r) for r in reading.replicas.values()],
            "gpus": [dcgm_json(g) for g in reading.gpus.values()],
            "skipped_lines": reading.skipped_lines[:50], "skipped_line_count": len(reading.skipped_lines),
            "refused": reading.refused[:50], "refused_count": len(reading.refused)}
