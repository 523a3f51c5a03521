"""Workers that print `(Worker pid=N)` before their rank is assigned are one start's workers.

public/73 (vLLM 0.18.1, Qwen2.5-32B at TP4 on four RTX 3090s) prints four `(Worker pid=N)` labels,
one per worker, before rank 0 becomes `(Worker_TP0 pid=N)`. The rule "a process label heard again
under another pid is another start" split it in two: a run with the model and no memory figure, and
one with the memory figures and no model. A label without an index of its own is shared by every
worker until its rank is known, so another pid under it is another worker of the same start.
"""

from __future__ import annotations

from .ingest_helpers import LOGS, parsed, rank, read, runs


def test_four_workers_under_one_unindexed_label_are_one_start() -> None:
    doc = parsed(read(next((LOGS / "public").glob("73-*.log"))))
    (run,) = runs(doc)
    assert run["settings"]["model"] == "/workspace/qwen/Qwen2.5-32B-Instruct" and run["layout"]["tp"]["value"] == 4
    assert run["engine"]["kv_tokens"] == 85_760
    tp0 = rank(run, "TP0")
    assert tp0["kv_bytes"] == round(5.24 * 2**30) and tp0["weights_bytes"] == round(15.39 * 2**30)


def test_every_real_log_with_one_engine_banner_reads_as_one_run() -> None:
    """One `Initializing a V1 LLM engine` / `Initializing an LLM engine` line and one KV figure:
    one engine start, so one run (a boundary rule that splits it is wrong for that log)."""
    checked = 0
    for path in sorted(LOGS.glob("**/*.log")):
        text = read(path)
        banners = text.count("Initializing a V1 LLM engine") + text.count("Initializing an LLM engine")
        kv = text.count("GPU KV cache size:") + text.count("# GPU blocks:")
        if banners == 1 and kv == 1:
            checked += 1
            assert len(runs(parsed(text))) == 1, path.name
    assert checked >= 20
