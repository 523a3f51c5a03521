"""Issue 17 item 8: log lines that were not taken, as golden tests on real text.

- the `Memory profiling results:` table a 2024-12 dev build printed (one field per line,
  each with its own prefix): public/01 (two engine starts of one process);
- the v0.21+ `Estimated CUDA graph memory` line and vLLM's utilization advice: files 21, 22;
- `max_model_len` stated only in the engine-config line (`max_seq_len=`): file 23.
"""

from __future__ import annotations

from .ingest_helpers import LOGS, parsed, rank, read, runs

GIB = 2**30
PUBLIC = LOGS / "public"


def _gib(x: float) -> int:
    return round(x * GIB)


def test_profiling_table_rows_are_read_per_engine_start() -> None:
    doc = parsed(read(PUBLIC / "01-v064dev-llama3-8b-h100-tp1-tp2-profiling-table.log"))
    first, second = runs(doc)
    r = rank(first, "driver")
    assert r["total_bytes"] == _gib(79.22)
    assert r["requested_bytes"] == _gib(71.29)
    assert r["weights_bytes"] == _gib(14.96)
    assert r["non_torch_bytes"] == _gib(1.79)
    assert r["activation_bytes"] == _gib(1.26)
    assert r["kv_bytes"] == _gib(53.29)
    assert r["profile_seconds"] == 0.75
    assert first["settings"]["gpu_memory_utilization"] == 0.9
    # the printed identity holds: requested − weights − non_torch − activation = kv (±2 printed units)
    assert abs(71.29 - 14.96 - 1.79 - 1.26 - 53.29) <= 0.02
    # the second table (TP2: half the weights) is a second engine start, not a disagreement
    r2 = rank(second, "driver")
    assert r2["weights_bytes"] == _gib(7.48)
    assert r2["non_torch_bytes"] == _gib(3.58)
    assert r2["kv_bytes"] is None
    assert not [f for f in first["findings"] + second["findings"] if f["code"] == "inconsistent_value"]
    assert any("table" in b for b in first["version"]["basis"])


def test_profiling_table_with_baseline_and_spike_is_read() -> None:
    """public/29 (vLLM PR #11120's branch): target, baseline (weights + non-torch), spike, KV."""
    text = read(PUBLIC / "29-v064dev-unknown-h100-tp1-profiling-table-baseline.log")
    (run,) = runs(parsed(text))
    r = rank(run, "driver")
    assert r["total_bytes"] == _gib(79.33)
    assert r["requested_bytes"] == _gib(19.83)
    assert r["baseline_bytes"] == _gib(4.71)
    assert r["activation_bytes"] == _gib(2.35)
    assert r["kv_bytes"] == _gib(12.77)
    assert r["weights_bytes"] is None and r["non_torch_bytes"] is None  # the build does not split them
    assert r["evidence"]["kv_bytes"] == {"line": 8, "printed": "12.77 GiB"}
    assert run["settings"]["gpu_memory_utilization"] == 0.25
    # the printed identity: target − baseline − spike = KV (two printed units of rounding)
    assert abs(19.83 - 4.71 - 2.35 - 12.77) <= 0.02
    assert abs(r["requested_bytes"] - r["baseline_bytes"] - r["activation_bytes"] - r["kv_bytes"]) <= 2 * 5368709


def test_a_table_row_alone_is_not_mistaken_for_another_format() -> None:
    line = "INFO 12-13 19:54:18 worker.py:243] model weights take 14.96GiB; non_torch_memory takes 1.79GiB"
    doc = parsed(line)
    assert doc["runs"] == [] or rank(runs(doc)[0], "driver")["weights_bytes"] is None


def test_v021_cuda_graph_estimate_and_utilization_advice() -> None:
    (run,) = runs(parsed(read(LOGS / "22-v0271-tp2-cg-profiling.log")))
    for label in ("TP0", "TP1"):
        r = rank(run, label)
        assert r["cuda_graph_estimate_bytes"] == _gib(0.36)
        assert r["util_equivalent_without_cg"] == 0.8048
        assert r["util_suggested"] == 0.8352
    assert run["semantics"]["cuda_graphs_inside_budget"] is True
    (run21,) = runs(parsed(read(LOGS / "21-v021plus-6x3090-tp4-cg-profiling.log")))
    assert rank(run21, "TP1")["cuda_graph_estimate_bytes"] == _gib(0.17)
    assert rank(run21, "TP3")["util_suggested"] == 0.9271


def test_max_model_len_from_the_engine_config_line_only() -> None:
    text = read(LOGS / "23-v0240-tp1-cg-pool-actual-vs-estimated.log")
    assert "max_model_len" not in text and "max_seq_len=8192" in text
    (run,) = runs(parsed(text))
    assert run["settings"]["max_model_len"] == 8192
    assert run["settings"]["evidence"]["max_model_len"]["printed"] == "max_seq_len=8192"
