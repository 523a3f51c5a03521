"""The JSON entry point: validate a simulation document, run it, return a JSON-able dict.

Input (every key but ``pool`` optional)::

    {"pool": {"blocks": 1783, "block_size": 16},
     "pool_source": "text echoed back, e.g. which plan and rank the pool came from",
     "workload": {"prompt_tokens": {"lognormal": {"mean": 6.6, "sigma": 0.9},
                                    "min": 64, "max": 8192},      # or a list of lengths
                  "output_tokens": {...} | [...],
                  "shared_prefix_tokens": 512, "shared_fraction": 0.7,
                  "prefix_groups": 1, "requests_per_level": 2000},
     "ramp": [1, 2, 4, 8, 16, 24, 32, 48, 64, 96],
     "seed": 2,
     "scheduler": {"max_num_seqs": 256, "max_num_batched_tokens": 8192,
                   "enable_prefix_caching": true},
     "cost_model": {"base_s": 0.016, "per_prefill_token_s": 0.00016,
                    "per_decode_seq_s": 0.0001, "per_kv_token_read_s": 1.3e-7},
     "kv_tier": {"blocks": 90000, "block_load_s": 0.0000472}}

``kv_tier`` (optional) is an offload tier behind the pool: its capacity in GPU blocks and the time one
block takes to come back (``app.core.sim.tier``; a plan's CPU tier fills it, ``services.simulation``).

A ``{"plan": ...}`` document must be resolved to ``pool`` by the caller (a ``plan`` key
next to ``pool`` is ignored).  Any problem with the document raises :class:`SimInputError`
naming the field.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from dataclasses import asdict
from statistics import NormalDist
from typing import Any

from app.core.errors import InputError
from app.core.sim.cost import CostModel
from app.core.sim.ramp import SimConfig, simulate
from app.core.sim.state import SchedulerConfig, SimCancelled
from app.core.sim.tier import TierConfig
from app.core.sim.workload import DEFAULT_OUTPUT, DEFAULT_PROMPT, Empirical, LengthDist, Lognormal, Workload

__all__ = ["SimCancelled", "SimInputError", "config_json", "parse", "simulate_from_json"]

MAX_BLOCKS = 10**9
MAX_TOKENS = 10**7
MAX_LEVELS = 64
MAX_LIST = 100_000
# Prefill advances at most this many tokens a step: a tiny budget makes the run step through
# every prompt token (vLLM's own floor for chunked prefill is larger in practice).
MIN_BATCHED_TOKENS = 64


class SimInputError(InputError):
    """A bad simulation document: an ``InputError`` (``field`` names the field, ``message`` the
    problem), so it reaches the CLI and the web as every other input error does."""

    @property
    def field_path(self) -> str:
        return self.field


def _obj(value: object, path: str, allowed: set[str]) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise SimInputError(path, f"must be an object, not {_kind(value)}")
    for key in value:
        if not isinstance(key, str) or key not in allowed:
            raise SimInputError(f"{path}.{key}", f"unknown field (allowed: {', '.join(sorted(allowed))})")
    return value


def _kind(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _numeric_text(value: object) -> object:
    """A numeric string read as its number ("0.9" → 0.9, " 4096 " → 4096); anything else as given.
    The plan document's number policy (app/schemas.py): numbers lax, booleans strict."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return value


def json_int(value: object, path: str) -> int:
    """A whole number by the plan document's policy: a JSON integer, an integral float (2.0) or a
    numeric string ("2"); never true/false, NaN or a fraction (InputError naming `path`)."""
    value = _numeric_text(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        what = f"got {value!r}" if isinstance(value, float) else f"not {_kind(value)}"
        raise SimInputError(path, f"must be an integer, {what}")
    return value


def json_number(value: object, path: str) -> float:
    """A finite number by the plan document's policy: a JSON number or a numeric string ("0.9")."""
    value = _numeric_text(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SimInputError(path, f"must be a number, not {_kind(value)}")
    out = float(value)
    if not math.isfinite(out):
        raise SimInputError(path, f"must be a finite number, got {value}")
    return out


def _int(value: object, path: str, lo: int, hi: int) -> int:
    value = json_int(value, path)
    if not lo <= value <= hi:
        raise SimInputError(path, f"must be between {lo} and {hi}, got {value}")
    return value


def _num(value: object, path: str, lo: float, hi: float) -> float:
    out = json_number(value, path)
    if not math.isfinite(out) or not lo <= out <= hi:
        raise SimInputError(path, f"must be a finite number between {lo:g} and {hi:g}, got {value}")
    return out


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise SimInputError(path, f"must be true or false, not {_kind(value)}")
    return value


def _lengths(value: object, path: str, default: Lognormal) -> LengthDist:
    if value is None:
        return default
    if isinstance(value, list):
        if not value or len(value) > MAX_LIST:
            raise SimInputError(path, f"a list of lengths must hold 1 to {MAX_LIST} integers")
        return Empirical(tuple(_int(v, f"{path}[{i}]", 1, MAX_TOKENS) for i, v in enumerate(value)))
    spec = _obj(value, path, {"lognormal", "median", "p99", "min", "max"})
    if "median" in spec or "p99" in spec:
        mean, sigma = _median_p99(spec, path)
    else:
        if "lognormal" not in spec:
            raise SimInputError(f"{path}.lognormal", "is required (or median and p99, or a list of lengths)")
        params = _obj(spec["lognormal"], f"{path}.lognormal", {"mean", "sigma"})
        for key in ("mean", "sigma"):
            if key not in params:
                raise SimInputError(f"{path}.lognormal.{key}", "is required")
        mean = _num(params["mean"], f"{path}.lognormal.mean", -50.0, 50.0)
        sigma = _num(params["sigma"], f"{path}.lognormal.sigma", 0.0, 10.0)
    lo = _int(spec.get("min", 1), f"{path}.min", 1, MAX_TOKENS)
    hi = _int(spec.get("max", MAX_TOKENS), f"{path}.max", 1, MAX_TOKENS)
    if hi < lo:
        raise SimInputError(f"{path}.max", f"must be at least min ({lo}), got {hi}")
    return Lognormal(mean, sigma, lo, hi)


Z99 = NormalDist().inv_cdf(0.99)  # 2.3263: the p99 of a lognormal is exp(μ + Z99 σ)


def _median_p99(spec: Mapping[str, object], path: str) -> tuple[float, float]:
    """μ and σ of the lognormal whose median and 99th percentile are the given token counts:
    μ = ln(median), σ = (ln(p99) − ln(median)) / Z99."""
    if "lognormal" in spec:
        raise SimInputError(f"{path}.lognormal", "give either lognormal or median and p99, not both")
    for key in ("median", "p99"):
        if key not in spec:
            raise SimInputError(f"{path}.{key}", "is required with " + ("p99" if key == "median" else "median"))
    median = _num(spec["median"], f"{path}.median", 1.0, MAX_TOKENS)
    p99 = _num(spec["p99"], f"{path}.p99", 1.0, MAX_TOKENS)
    if p99 < median:
        raise SimInputError(f"{path}.p99", f"must be at least the median ({median:g}), got {p99:g}")
    return math.log(median), (math.log(p99) - math.log(median)) / Z99


def implied(dist: Lognormal) -> dict[str, float]:
    """The length distribution a lognormal implies, after clipping to [min, max]: its percentiles,
    mean and the share of draws clipped at each end (tokens)."""
    normal = NormalDist(dist.mean, dist.sigma) if dist.sigma > 0 else None

    def q(p: float) -> float:
        x = math.exp(normal.inv_cdf(p)) if normal is not None else math.exp(dist.mean)
        return min(max(x, dist.min_tokens), dist.max_tokens)

    def below(x: float) -> float:
        if normal is None:
            return 1.0 if math.exp(dist.mean) < x else 0.0
        return normal.cdf(math.log(x))

    return {"median": math.exp(dist.mean), "p10": q(0.10), "p50": q(0.50), "p90": q(0.90), "p99": q(0.99),
            "mean_unclipped": math.exp(dist.mean + dist.sigma**2 / 2),
            "clipped_low": below(dist.min_tokens), "clipped_high": 1.0 - below(dist.max_tokens)}


def _workload(value: object) -> tuple[Workload, int]:
    spec = _obj({} if value is None else value, "workload", {
        "prompt_tokens", "output_tokens", "shared_prefix_tokens", "shared_fraction",
        "prefix_groups", "requests_per_level"})
    workload = Workload(
        prompt=_lengths(spec.get("prompt_tokens"), "workload.prompt_tokens", DEFAULT_PROMPT),
        output=_lengths(spec.get("output_tokens"), "workload.output_tokens", DEFAULT_OUTPUT),
        shared_prefix_tokens=_int(spec.get("shared_prefix_tokens", 0), "workload.shared_prefix_tokens",
                                  0, MAX_TOKENS),
        shared_fraction=_num(spec.get("shared_fraction", 0.0), "workload.shared_fraction", 0.0, 1.0),
        prefix_groups=_int(spec.get("prefix_groups", 1), "workload.prefix_groups", 1, 100_000),
    )
    requests = _int(spec.get("requests_per_level", 2000), "workload.requests_per_level", 1, 10**8)
    return workload, requests


def _ramp(value: object) -> tuple[int, ...]:
    if value is None:
        return SimConfig(blocks=2).ramp
    if not isinstance(value, list) or not value or len(value) > MAX_LEVELS:
        raise SimInputError("ramp", f"must be a list of 1 to {MAX_LEVELS} concurrency levels")
    levels = tuple(_int(v, f"ramp[{i}]", 1, 100_000) for i, v in enumerate(value))
    for i in range(1, len(levels)):
        if levels[i] <= levels[i - 1]:
            raise SimInputError(f"ramp[{i}]", "levels must be strictly increasing")
    return levels


def _scheduler(value: object) -> SchedulerConfig:
    d = SchedulerConfig()
    spec = _obj({} if value is None else value, "scheduler",
                {"max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching"})
    out = SchedulerConfig(
        max_num_seqs=_int(spec.get("max_num_seqs", d.max_num_seqs), "scheduler.max_num_seqs", 1, 100_000),
        max_num_batched_tokens=_int(spec.get("max_num_batched_tokens", d.max_num_batched_tokens),
                                    "scheduler.max_num_batched_tokens", MIN_BATCHED_TOKENS, MAX_TOKENS),
        enable_prefix_caching=_bool(spec.get("enable_prefix_caching", d.enable_prefix_caching),
                                    "scheduler.enable_prefix_caching"),
    )
    # vLLM refuses the same: vllm/config/scheduler.py, SchedulerConfig._verify_args.
    if out.max_num_batched_tokens < out.max_num_seqs:
        raise SimInputError("scheduler.max_num_batched_tokens",
                            f"must be at least max_num_seqs ({out.max_num_seqs}), "
                            f"got {out.max_num_batched_tokens}")
    return out


def _cost(value: object) -> CostModel:
    d = asdict(CostModel())
    spec = _obj({} if value is None else value, "cost_model", set(d))
    values = {k: _num(spec.get(k, d[k]), f"cost_model.{k}", 0.0, 1e3) for k in d}
    if values["base_s"] <= 0:
        raise SimInputError("cost_model.base_s", "must be above 0 (every step takes time)")
    return CostModel(**values)


def _tier(value: object) -> TierConfig | None:
    if value is None:
        return None
    spec = _obj(value, "kv_tier", {"blocks", "block_load_s"})
    if "blocks" not in spec:
        raise SimInputError("kv_tier.blocks", "is required (the tier's capacity in GPU blocks)")
    return TierConfig(blocks=_int(spec["blocks"], "kv_tier.blocks", 0, MAX_BLOCKS),
                      block_load_s=_num(spec.get("block_load_s", 0.0), "kv_tier.block_load_s", 0.0, 10.0))


def parse(doc: object) -> tuple[SimConfig, int, str | None]:
    """The validated configuration, the seed and the echoed pool source."""
    top = _obj(doc, "$", {"pool", "pool_source", "plan", "workload", "ramp", "seed", "scheduler",
                          "cost_model", "cost_source", "kv_tier"})
    if "pool" not in top:
        raise SimInputError("pool", "is required: {\"blocks\": N, \"block_size\": 16} "
                                    "(resolve a plan to its binding rank's pool first)")
    pool = _obj(top["pool"], "pool", {"blocks", "block_size"})
    if "blocks" not in pool:
        raise SimInputError("pool.blocks", "is required")
    blocks = _int(pool["blocks"], "pool.blocks", 2, MAX_BLOCKS)
    block_size = _int(pool.get("block_size", 16), "pool.block_size", 1, 4096)
    source = top.get("pool_source")
    if source is not None and not isinstance(source, str):
        raise SimInputError("pool_source", f"must be a string, not {_kind(source)}")
    workload, requests = _workload(top.get("workload"))
    seed = _int(top.get("seed", 0), "seed", 0, 2**63 - 1)
    cfg = SimConfig(blocks=blocks, block_size=block_size, workload=workload, requests_per_level=requests,
                    ramp=_ramp(top.get("ramp")), scheduler=_scheduler(top.get("scheduler")),
                    cost=_cost(top.get("cost_model")), tier=_tier(top.get("kv_tier")))
    need = -(-workload.longest_request_tokens() // block_size)
    if need > blocks - 1:
        raise SimInputError("pool.blocks", f"{blocks} blocks (one is vLLM's null block) cannot hold the "
                                           f"longest possible request: it needs {need} blocks")
    return cfg, seed, source


def _dist_json(dist: LengthDist) -> dict[str, object] | list[int]:
    if isinstance(dist, Empirical):
        return list(dist.lengths)
    return {"lognormal": {"mean": dist.mean, "sigma": dist.sigma}, "min": dist.min_tokens,
            "max": dist.max_tokens, "implied": implied(dist)}


def config_json(cfg: SimConfig, seed: int, source: str | None) -> dict[str, Any]:
    """The resolved input (defaults filled in), echoed in the output."""
    w = cfg.workload
    return {
        "pool": {"blocks": cfg.blocks, "block_size": cfg.block_size, "usable_blocks": cfg.blocks - 1,
                 "tokens": (cfg.blocks - 1) * cfg.block_size},
        "pool_source": source,
        "workload": {"prompt_tokens": _dist_json(w.prompt), "output_tokens": _dist_json(w.output),
                     "shared_prefix_tokens": w.shared_prefix_tokens, "shared_fraction": w.shared_fraction,
                     "prefix_groups": w.prefix_groups, "requests_per_level": cfg.requests_per_level},
        "ramp": list(cfg.ramp),
        "seed": seed,
        "scheduler": asdict(cfg.scheduler),
        "cost_model": asdict(cfg.cost),
        **({"kv_tier": asdict(cfg.tier)} if cfg.tier is not None else {}),
    }


def simulate_from_json(doc: dict[str, object], *, max_work: int | None = None,
                       progress: Callable[[float], None] | None = None,
                       cancel: Callable[[], bool] | None = None) -> dict[str, object]:
    """Validate ``doc``, run the ramp (and the ramp without a shared prefix), return the result.

    ``max_work`` caps ``requests_per_level × len(ramp)``; ``progress`` receives the fraction
    of levels done; ``cancel`` returning True stops the run with ``SimCancelled``."""
    cfg, seed, source = parse(doc)
    work = cfg.requests_per_level * len(cfg.ramp)
    if max_work is not None and work > max_work:
        raise SimInputError("workload.requests_per_level",
                            f"requests_per_level × len(ramp) = {work} exceeds the limit of {max_work}")
    cost_source = doc.get("cost_source")
    if cost_source is not None and not isinstance(cost_source, str):
        raise SimInputError("cost_source", f"must be a string, not {_kind(cost_source)}")
    result = simulate(cfg, random.Random(seed), progress=progress, cancel=cancel)
    given = "cost_model" in doc
    echoed = {**config_json(cfg, seed, source),
              "cost_source": cost_source or ("as given" if given else "illustrative defaults (an 8B bf16 model "
                                                                     "on a ~1 TB/s card)")}
    return {"input": echoed, **result}
