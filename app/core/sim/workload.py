"""The request mix: seeded prompt and output lengths and a shared-prefix fraction.

Seed 002 samples prompt lengths like ``np.clip(np.random.lognormal(6.6, 0.9).astype(int),
64, 8192)`` (median ≈ 735 tokens, p99 ≈ 5,900); ``random.lognormvariate(mu, sigma)`` is the
same distribution (``exp(N(mu, sigma))``).  Seed 002 gives no output lengths: the default
here, lognormal(5.3, 0.8) clipped to 16…2,048 (median ≈ 200), is an illustrative choice.

A request that shares the prefix starts with the ``shared_prefix_tokens`` tokens of one of
``prefix_groups`` common prefixes (one by default: a system prompt); its prompt is
``max(n, shared_prefix_tokens)`` tokens long, as in seed 002's ``make_request``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Lognormal:
    """``clip(int(exp(N(mean, sigma))), min_tokens, max_tokens)``."""

    mean: float
    sigma: float
    min_tokens: int
    max_tokens: int

    def sample(self, rng: random.Random) -> int:
        n = int(rng.lognormvariate(self.mean, self.sigma))
        return min(max(n, self.min_tokens), self.max_tokens)

    @property
    def largest(self) -> int:
        return self.max_tokens


@dataclass(frozen=True, slots=True)
class Empirical:
    """Lengths drawn uniformly (with replacement) from a user-supplied list."""

    lengths: tuple[int, ...]

    def sample(self, rng: random.Random) -> int:
        return self.lengths[rng.randrange(len(self.lengths))]

    @property
    def largest(self) -> int:
        return max(self.lengths)


LengthDist = Lognormal | Empirical

DEFAULT_PROMPT = Lognormal(6.6, 0.9, 64, 8192)
DEFAULT_OUTPUT = Lognormal(5.3, 0.8, 16, 2048)


@dataclass(frozen=True, slots=True)
class Workload:
    prompt: LengthDist = DEFAULT_PROMPT
    output: LengthDist = DEFAULT_OUTPUT
    shared_prefix_tokens: int = 0
    shared_fraction: float = 0.0
    prefix_groups: int = 1

    def longest_request_tokens(self) -> int:
        """The most KV positions one request can hold (its last sampled token never is)."""
        prompt = self.prompt.largest
        if self.shared_fraction > 0:
            prompt = max(prompt, self.shared_prefix_tokens)
        return prompt + self.output.largest - 1


@dataclass(frozen=True, slots=True)
class RequestSpec:
    prompt_tokens: int
    output_tokens: int
    group: int
    """Index of the shared prefix it starts with, or -1 for a fully unique prompt."""


def make_requests(workload: Workload, count: int, rng: random.Random) -> list[RequestSpec]:
    """``count`` requests; each consumes the same draws whatever the shared fraction is,
    so two workloads that differ only in sharing get the same lengths."""
    out: list[RequestSpec] = []
    for _ in range(count):
        n = workload.prompt.sample(rng)
        o = max(1, workload.output.sample(rng))
        u = rng.random()
        g = rng.randrange(workload.prefix_groups)
        if u < workload.shared_fraction and workload.shared_prefix_tokens > 0:
            out.append(RequestSpec(max(n, workload.shared_prefix_tokens), o, g))
        else:
            out.append(RequestSpec(n, o, -1))
    return out


def without_sharing(requests: list[RequestSpec]) -> list[RequestSpec]:
    """The same requests, token for token as long, with nothing shared."""
    return [RequestSpec(r.prompt_tokens, r.output_tokens, -1) for r in requests]
