"""What one concurrency level measures, and over which window.

A level runs a closed loop: ``N`` requests arrive at time 0 and every completion brings the
next request in, until ``requests_per_level`` have been issued; then the loop drains.
Metrics are taken over a steady-state window in which exactly ``N`` requests are in the
system: from the completion numbered ``(R − N) // 10`` (a 10 % warm-up) to the completion
numbered ``R − N`` (the moment the last request arrives).  When ``R <= N`` there is no
steady state and the whole run is measured (``steady_state`` is false).

Definitions (all over the window):

- ``throughput_tokens_per_s``: output tokens sampled / window length;
- ``requests_per_s``: completions / window length;
- TTFT, TPOT, latency: over the requests completed in the window (TPOT = (finish − first
  token) / (output tokens − 1), requests with one output token excluded);
- ``kv_usage``: mean over engine steps of blocks referenced by running requests / usable
  blocks (vLLM's ``1 − free / total``, cached-but-unreferenced blocks count as free);
  ``kv_usage_peak`` its maximum;
- ``prefix_hit_rate``: prefix-cache hit tokens / queried tokens over every admission,
  re-admissions after preemption included (vLLM's hits / queries);
- ``preemptions``, ``evictions`` (cached prefix blocks reclaimed), ``recomputed_tokens``
  (computed tokens thrown away by preemption);
- ``mean_in_flight``: time-weighted number of requests in the system (Little's L).
"""

from __future__ import annotations

from dataclasses import dataclass, field


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``q`` in [0, 1]."""
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


@dataclass(slots=True)
class Window:
    """Accumulators; the engine adds to them only while ``open``."""

    usable_blocks: int
    tier: bool = False  # an offload tier is configured: its figures join the summary
    open: bool = False
    start_s: float = 0.0
    end_s: float = 0.0
    steps: int = 0
    busy_s: float = 0.0
    output_tokens: int = 0
    prefill_tokens: int = 0
    used_block_steps: int = 0
    used_blocks_peak: int = 0
    running_steps: int = 0
    in_flight_s: float = 0.0
    hit_tokens: int = 0
    queried_tokens: int = 0
    preemptions: int = 0
    evictions: int = 0
    recomputed_tokens: int = 0
    tier_hit_tokens: int = 0
    tier_load_s: float = 0.0
    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    latency_s: list[float] = field(default_factory=list)

    def add_steps(self, steps: int, dt: float, out: int, prefill: int, used_sum: int, used_peak: int,
                  running: int, in_flight: int) -> None:
        self.steps += steps
        self.busy_s += dt
        self.output_tokens += out
        self.prefill_tokens += prefill
        self.used_block_steps += used_sum
        self.used_blocks_peak = max(self.used_blocks_peak, used_peak)
        self.running_steps += running * steps
        self.in_flight_s += in_flight * dt

    def add_request(self, arrival_s: float, first_s: float, finish_s: float, output: int) -> None:
        self.latency_s.append(finish_s - arrival_s)
        self.ttft_s.append(first_s - arrival_s)
        if output > 1:
            self.tpot_s.append((finish_s - first_s) / (output - 1))

    def summary(self, concurrency: int, steady: bool) -> dict[str, object]:
        span = self.end_s - self.start_s
        per_s = 1.0 / span if span > 0 else 0.0
        ttft = sorted(self.ttft_s)
        tpot = sorted(self.tpot_s)
        lat = self.latency_s
        steps = max(self.steps, 1)
        out: dict[str, object] = {
            "concurrency": concurrency,
            "throughput_tokens_per_s": self.output_tokens * per_s,
            "requests_per_s": len(lat) * per_s,
            "ttft_p50_s": percentile(ttft, 0.5),
            "ttft_p99_s": percentile(ttft, 0.99),
            "tpot_p50_s": percentile(tpot, 0.5),
            "tpot_p99_s": percentile(tpot, 0.99),
            "latency_mean_s": sum(lat) / len(lat) if lat else 0.0,
            "kv_usage": self.used_block_steps / steps / max(self.usable_blocks, 1),
            "kv_usage_peak": self.used_blocks_peak / max(self.usable_blocks, 1),
            "prefix_hit_rate": self.hit_tokens / self.queried_tokens if self.queried_tokens else 0.0,
            "preemptions": self.preemptions,
            "evictions": self.evictions,
            "recomputed_tokens": self.recomputed_tokens,
            "prefill_tokens": self.prefill_tokens,
            "mean_running": self.running_steps / steps,
            "mean_in_flight": self.in_flight_s * per_s,
            "steps": self.steps,
            "measured_requests": len(lat),
            "window_s": span,
            "steady_state": steady,
        }
        if self.tier:
            out["tier_hit_tokens"] = self.tier_hit_tokens
            out["tier_load_s"] = self.tier_load_s
        return out
