"""The concurrency-cliff simulator: a paged KV pool under a closed-loop ramp (seed 002).

Pure and seeded: the caller passes the ``random.Random``; nothing here does I/O.
``simulate_from_json`` (``io.py``) is the JSON entry point; ``simulate`` (``ramp.py``) the
typed one.

Simplifications against vLLM V1 (each makes the simulator slightly pessimistic or is
immaterial for the synthetic workload):

- Only shared-prefix blocks are cached.  vLLM hashes every full block, so a preempted
  request that is re-admitted before its freed blocks are reused hits its own blocks; here
  it recomputes its whole prompt and output (recompute cost is an upper bound).
- A block is cached when the step that computes it ends (vLLM caches at scheduling time, so
  a request admitted later in the same step may hit it); a prefix block computed twice
  concurrently is cached once, and the second copy stops that request's caching.
- The hit rate counts each admission once (vLLM counts every lookup, including those of a
  waiting request that then does not fit).
- No speculative decoding, lookahead slots, ``long_prefill_token_threshold``, priority
  scheduling, LoRA, encoder inputs or KV transfer.
"""

from app.core.sim.cost import CostModel
from app.core.sim.io import SimInputError, simulate_from_json
from app.core.sim.ramp import RECOMMENDATION_RULE, SimConfig, simulate
from app.core.sim.state import SchedulerConfig, SimCancelled
from app.core.sim.workload import Empirical, Lognormal, Workload

__all__ = [
    "RECOMMENDATION_RULE",
    "CostModel",
    "Empirical",
    "Lognormal",
    "SchedulerConfig",
    "SimCancelled",
    "SimConfig",
    "SimInputError",
    "Workload",
    "simulate",
    "simulate_from_json",
]
