"""The sizing search's own rules (app.core.sizing, app.core.sizing_answer), on made-up outcomes:
replica counts, the fewest replicas by brute force, the shared-card budget by hand, the ranking,
and what a near miss says it lacks."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.ledger import requested_bytes
from app.core.sizing import (
    PROCESS_BASELINE_BYTES,
    Candidate,
    EngineConfig,
    EngineOutcome,
    Space,
    Target,
    engine_configs,
    meets,
    replica_counts,
    shared_free_at_start,
    smallest_meeting,
    space_size,
)
from app.core.sizing_answer import missing, rank_key, search

GIB = 2**30
H100 = 85_029_615_043  # round(79.19 GiB), the H100 80GB preset


def config(tp: int = 1, pp: int = 1, n: int = 1, kv: str = "auto", q: str | None = None, util: float = 0.9,
           gpu: str = "H100 80GB") -> EngineConfig:  # fmt: skip
    return EngineConfig(gpu, H100, tp, pp, n, kv, q, util)


def outcome(
    conc: int, tokens: int = 100_000, seqs: int = 1024, starts: bool = True, fits: bool = True
) -> EngineOutcome:
    return EngineOutcome(starts, fits, tokens, tokens, conc, seqs, conc / 2, 50_000, "" if starts else "no room")


def test_shared_card_budget_by_hand() -> None:
    """Two engines at 0.45 of an H100 each: the second sees 79.19 GiB − its own 0.5 GiB − the first's
    0.5 GiB and ceil(0.45 × total) budget; vLLM's check is budget ≤ free (request_memory)."""
    budget = -(-H100 * 45 // 100)
    assert requested_bytes(H100, 0.45) == budget == 38_263_326_770
    free = H100 - 2 * 512 * 2**20 - budget
    assert shared_free_at_start(H100, 0.45, 2) == free == 45_692_546_449
    assert free >= budget
    # Two at 0.5 each no longer fit: the second engine would refuse to start.
    assert shared_free_at_start(H100, 0.5, 2) < requested_bytes(H100, 0.5)
    assert shared_free_at_start(H100, 0.9, 1) == H100 - PROCESS_BASELINE_BYTES


def test_per_engine_utilization_is_the_card_share() -> None:
    assert config(n=2, util=0.9).gpu_memory_utilization == 0.45
    assert config(n=4, util=0.9).gpu_memory_utilization == 0.225
    assert config(n=3, util=0.95).gpu_memory_utilization == 0.316  # rounded down to 3 decimals
    assert config(n=1).free_at_start_bytes is None
    assert config(n=2).free_at_start_bytes == shared_free_at_start(H100, 0.45, 2)


def test_replica_counts_fill_whole_cards() -> None:
    assert list(replica_counts(config(tp=4), 16)) == [1, 2, 3, 4]
    assert list(replica_counts(config(tp=1, n=4), 2)) == [4, 8]  # 4 engines share each card
    assert list(replica_counts(config(tp=8, pp=2), 8)) == []
    assert Candidate(config(tp=2, n=2), outcome(5), 6).gpus == 6


@settings(max_examples=300, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2]), n=st.sampled_from([1, 2, 4]),
    conc=st.integers(0, 80), seqs=st.integers(1, 100), tokens=st.integers(0, 10**6),
    want_conc=st.one_of(st.none(), st.integers(1, 500)), want_tokens=st.one_of(st.none(), st.integers(1, 10**7)),
    max_gpus=st.integers(1, 32), serves=st.booleans(),
)  # fmt: skip
def test_fewest_replicas_is_the_brute_force_minimum(
    tp: int, pp: int, n: int, conc: int, seqs: int, tokens: int, want_conc: int | None, want_tokens: int | None,
    max_gpus: int, serves: bool,
) -> None:  # fmt: skip
    c, o = config(tp, pp, n), outcome(conc, tokens, seqs, starts=serves)
    target = Target(32_768, want_conc, None, want_tokens)
    brute = [dp for dp in replica_counts(c, max_gpus) if meets(Candidate(c, o, dp), target)]
    assert smallest_meeting(c, o, target, max_gpus) == (brute[0] if brute else None)


def test_concurrency_is_capped_by_max_num_seqs() -> None:
    o = outcome(500, seqs=256)
    assert o.concurrency == 256
    cand = Candidate(config(), o, 1)
    text = missing(cand, Target(8192, 400), 8)
    assert text is not None and "256 of 400 requests" in text and "max_num_seqs 256 caps each engine" in text


def test_missing_names_the_first_limit_that_fails() -> None:
    target = Target(32_768, 40, 12_000)
    no_start = missing(Candidate(config(tp=2), outcome(0, starts=False), 1), target, 8)
    assert no_start is not None and "does not start (no room)" in no_start
    too_long = missing(Candidate(config(tp=2), outcome(10, fits=False), 1), target, 8)
    assert too_long is not None and "one 32,768-token request does not fit" in too_long and "50,000" in too_long
    short = missing(Candidate(config(tp=4, gpu="L40S 48GB"), outcome(31), 1), target, 4)
    assert short is not None and short.startswith("TP4 on L40S 48GB")
    assert "31 of 40 requests at 12,000 live tokens" in short and "takes 8 GPUs, over max_gpus=4" in short
    assert missing(Candidate(config(tp=4), outcome(40), 1), target, 4) is None


def test_ranking_gpus_then_compromises_then_headroom() -> None:
    target = Target(32_768, 40, 12_000)
    best = Candidate(config(tp=4), outcome(41), 1)
    order = [
        best,
        Candidate(config(tp=4, kv="fp8"), outcome(90), 1),  # a compromise, more headroom: after
        Candidate(config(tp=4, q="fp8"), outcome(95), 1),  # weights quantized: after fp8 KV
        Candidate(config(tp=4, q="fp8", kv="fp8"), outcome(200), 1),  # two compromises
        Candidate(config(tp=1), outcome(45), 8),  # 8 GPUs
    ]
    assert sorted(reversed(order), key=lambda c: rank_key(c, target)) == order
    more = Candidate(config(tp=4), outcome(60), 1)
    assert sorted([best, more], key=lambda c: rank_key(c, target))[0] is more  # headroom breaks the tie


def test_search_first_option_is_the_fewest_gpus_by_brute_force() -> None:
    """A made-up engine: concurrency 9 × TP, plus 5 with fp8 KV; one engine per GPU never starts
    at TP1 with weights unquantized."""
    space = Space([("H100 80GB", H100), ("L40S 48GB", 44 * GIB)], [1, 2, 4, 8], [1, 2], ["auto", "fp8"],
                  [None, "fp8"], [0.9], [1, 2], 8)  # fmt: skip

    def evaluate(c: EngineConfig) -> EngineOutcome | str:
        if c.tp == 8 and c.gpu.startswith("L40S"):
            return "refused"
        starts = not (c.tp == 1 and c.quantization is None)
        return outcome(9 * c.tp * c.pp // c.engines_per_gpu + (5 if c.kv_cache_dtype == "fp8" else 0), starts=starts)

    target = Target(4096, 70)
    answer = search(space, target, evaluate)
    everything = [
        Candidate(c, o, dp) for c in engine_configs(space) if not isinstance(o := evaluate(c), str)
        for dp in replica_counts(c, space.max_gpus)
    ]  # fmt: skip
    assert answer.searched == space_size(space) == sum(len(replica_counts(c, 8)) for c in engine_configs(space))
    fewest = min(c.gpus for c in everything if meets(c, target))
    assert answer.options[0].gpus == fewest
    best = min((c for c in everything if meets(c, target)), key=lambda c: rank_key(c, target))
    assert answer.options[0] == best
    assert all(c.gpus < fewest for c, _ in answer.near_misses)
    assert {c.label for c, _ in answer.excluded} == {"TP8 on L40S 48GB", "TP8 2 engines/GPU on L40S 48GB"}
    assert len(answer.excluded) == 8 and answer.evaluated == len(list(engine_configs(space)))
    front = [(c.gpus, c.concurrency) for c in answer.pareto]
    assert front == sorted(front) and all(b[1] > a[1] for a, b in itertools.pairwise(front))
