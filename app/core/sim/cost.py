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
