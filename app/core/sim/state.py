"""The engine's vocabulary: request states, scheduler settings, one request's bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.sim.workload import RequestSpec

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3


class SimCancelled(Exception):
    """The caller's ``cancel()`` returned True."""


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """vLLM V1 online-serving defaults (``max_num_seqs`` 256, ``max_num_batched_tokens`` 8192)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    enable_prefix_caching: bool = True


class Seq:
    """One request.  While DECODE, ``computed`` and ``generated`` are as of clock ``gbase``."""

    __slots__ = ("admit_no", "arrival_s", "blocks", "computed", "dup", "first_s", "gbase",
                 "generated", "group", "nkeys", "output", "prompt", "state", "tag", "tokens")

    def __init__(self, spec: RequestSpec, arrival_s: float) -> None:
        self.prompt = spec.prompt_tokens
        self.output = spec.output_tokens
        self.group = spec.group
        self.arrival_s = arrival_s
        self.first_s = -1.0
        self.tokens = spec.prompt_tokens
        self.computed = self.generated = self.blocks = self.gbase = self.admit_no = self.tag = 0
        self.nkeys = 0  # it holds the cached prefix blocks (group, 0..nkeys-1)
        self.dup = False  # a prefix block was computed twice: register no further blocks
        self.state = WAITING


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)
