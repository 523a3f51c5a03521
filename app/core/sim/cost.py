"""The step cost model: how long one engine step takes.

``step_s = base_s + per_prefill_token_s × prefill_tokens + per_decode_seq_s × decode_seqs
+ per_kv_token_read_s × kv_tokens_read``

where ``prefill_tokens`` is the number of prompt (or recomputed) tokens the step computes,
``decode_seqs`` the number of sequences that compute their one next token, and
``kv_tokens_read`` the context length every scheduled sequence attends over (the sum of
each one's cached tokens after the step).

The defaults are **illustrative**, not measured: a 7-8B bf16 model (seed 002's 131,072
bytes of KV per token) on one 24 GB-class GPU with about 1 TB/s of memory bandwidth and
about 100 TFLOP/s of sustained bf16 compute:

- ``base_s`` = 16 ms: every step streams the ~16 GB of weights once (16 GB / 1 TB/s);
- ``per_prefill_token_s`` = 0.16 ms: ~2 × 8e9 FLOP per token at ~100 TFLOP/s;
- ``per_decode_seq_s`` = 0.1 ms: per-sequence compute, sampling and scheduling overhead;
- ``per_kv_token_read_s`` = 0.13 µs: 131,072 bytes of KV per context token at 1 TB/s.

A linear sum overstates a step where compute and memory traffic overlap; calibrate the four
coefficients against a measured engine (step times at two batch sizes and two prefill
sizes) before trusting absolute figures.  The shape of the ramp (where throughput peaks)
depends mostly on the pool and the length mix, much less on these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CostModel:
    base_s: float = 0.016
    per_prefill_token_s: float = 0.16e-3
    per_decode_seq_s: float = 0.1e-3
    per_kv_token_read_s: float = 0.13e-6

    def step_s(self, prefill_tokens: int, decode_seqs: int, kv_tokens_read: int) -> float:
        return (
            self.base_s
            + self.per_prefill_token_s * prefill_tokens
            + self.per_decode_seq_s * decode_seqs
            + self.per_kv_token_read_s * kv_tokens_read
        )

    def decode_run_s(self, steps: int, seqs: int, context_sum: int) -> float:
        """Total time of ``steps`` pure-decode steps of ``seqs`` sequences whose contexts
        sum to ``context_sum`` tokens before the first of them (each step reads one more
        token per sequence): the closed form of summing :meth:`step_s`."""
        reads = steps * (context_sum + seqs) + seqs * steps * (steps - 1) // 2
        return (
            steps * (self.base_s + self.per_decode_seq_s * seqs) + self.per_kv_token_read_s * reads
        )


@dataclass(frozen=True, slots=True)
class ReplicaShape:
    """What one engine step moves on the slowest rank of a replica, from a plan."""

    weights_bytes_per_rank: int  # the largest stage's weights on one rank
    kv_bytes_per_token_per_rank: int  # one context token's KV on one rank (its stage's layers)
    pp: int  # pipeline stages a batch passes through one after another
    weight_bytes_per_param: float  # 2 for bf16; 1 for fp8 checkpoints; ~0.5 for 4-bit


def roofline_cost(shape: ReplicaShape, hbm_bytes_per_s: float, flops: float) -> tuple[CostModel, str]:
    """A roofline step cost from the plan's model and layout and the GPU's peak figures (an
    estimate: a lower bound on step time, since engines reach ~60–85 % of peak bandwidth):

    - ``base_s`` = weights per rank × pp / bandwidth: every step streams each stage's weights once;
    - ``per_kv_token_read_s`` = KV bytes per token per rank × pp / bandwidth;
    - ``per_prefill_token_s`` = 2 FLOP per parameter per rank × pp / BF16 throughput (parameters =
      weight bytes / bytes per parameter; a MoE counts every expert, so this overstates it);
    - ``per_decode_seq_s`` keeps the illustrative 0.1 ms (sampling and scheduling per sequence).

    TP all-reduce time and overlap of compute with memory traffic are not modelled."""
    if hbm_bytes_per_s <= 0 or flops <= 0 or shape.pp < 1 or shape.weight_bytes_per_param <= 0:
        raise ValueError("roofline_cost needs positive bandwidth, throughput, pp and bytes per parameter")
    base = shape.weights_bytes_per_rank * shape.pp / hbm_bytes_per_s
    kv = shape.kv_bytes_per_token_per_rank * shape.pp / hbm_bytes_per_s
    params = shape.weights_bytes_per_rank / shape.weight_bytes_per_param
    prefill = 2 * params * shape.pp / flops
    cost = CostModel(base_s=max(base, 1e-6), per_prefill_token_s=prefill,
                     per_decode_seq_s=CostModel().per_decode_seq_s, per_kv_token_read_s=kv)
    why = (f"roofline estimate: base {base * 1e3:.2f} ms = {shape.weights_bytes_per_rank / 2**30:.2f} GiB weights"
           f" per rank × {shape.pp} stage(s) / {hbm_bytes_per_s / 1e12:.2f} TB/s; per prefill token"
           f" {prefill * 1e6:.2f} µs = 2 FLOP × {params / 1e9:.2f} B params per rank × {shape.pp} /"
           f" {flops / 1e12:.0f} TFLOP/s; per KV token read {kv * 1e9:.2f} ns ="
           f" {shape.kv_bytes_per_token_per_rank:,} B per rank × {shape.pp} / bandwidth; per decode sequence 0.1 ms"
           " illustrative; TP all-reduce not modelled (peak figures: a lower bound on step time)")
    return cost, why
