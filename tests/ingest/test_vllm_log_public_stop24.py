"""The importer on stop 24's public logs (tests/data/vllm-logs/public/48-55): the two it could not read (the
PR #3120 branch's weights in MB, PyTorch's CUDA out-of-memory start-up failure) and the PP layout it reads."""

from __future__ import annotations

from typing import Any

from .ingest_helpers import LOGS, parsed, rank, read, runs

PUBLIC = LOGS / "public"
GIB, MIB = 2**30, 2**20


def _doc(name: str) -> dict[str, Any]:
    (path,) = PUBLIC.glob(name + "-*.log")
    return parsed(read(path))


def test_weights_printed_in_mb_are_mib() -> None:
    """public/53 (vLLM PR #3120's branch): 'Loading model weights took 244.61 MB' is bytes / 2**20 (opt-125m's
    fp16 parameters are 250.5e6 bytes, more than 244.61e6), beside the blocks line it always had."""
    (run,) = runs(_doc("53"))
    driver = rank(run, "driver")
    assert driver["weights_bytes"] == round(244.61 * MIB)
    assert driver["evidence"]["weights_bytes"]["printed"] == "244.61 MB"
    assert driver["weights_bytes"] > 250_478_592 > 244.61e6  # the parameters alone: only MiB fits
    assert run["engine"]["num_gpu_blocks"] == 76240


def test_cuda_out_of_memory_while_loading_is_a_start_up_failure() -> None:
    """public/55 (vLLM CI on an L4, PR #20831): read nothing before; now the run and its failure, with the
    numbers PyTorch printed."""
    doc = _doc("55")
    assert doc["findings"] == []  # was: no_vllm_memory_lines
    (run,) = runs(doc)
    (oom,) = [f for f in run["findings"] if f["code"] == "cuda_out_of_memory"]
    assert oom["severity"] == "error" and oom["line"] == 3
    assert oom["total_capacity_bytes"] == round(22.05 * GIB)
    assert oom["tried_bytes"] == 704 * MIB and oom["free_bytes"] == round(508.12 * MIB)
    assert oom["allocated_by_pytorch_bytes"] == round(21.30 * GIB)
    assert "22.05 GiB" in oom["message"] and "704.00 MiB" in oom["message"]


def test_out_of_memory_after_kv_sizing_keeps_the_run_and_reports_once() -> None:
    """Log 38 (gpt-oss-20b, v0.19: the sampler warm-up ran out of memory after the KV cache was sized): the KV
    figure stays read and the OOM, printed twice by one process, is one finding."""
    (path,) = LOGS.glob("38-*.log")
    (run,) = runs(parsed(read(path)))
    assert [f["code"] for f in run["findings"] if f["code"] == "cuda_out_of_memory"] == ["cuda_out_of_memory"]
    assert any(r.get("kv_bytes") for r in run["ranks"])


def test_pp_ranks_of_public_48() -> None:
    """public/48 (TP2 x PP2): four ranks, the two PP stages with their own KV, one token count."""
    (run,) = runs(_doc("48"))
    kv = {r["rank"]: r["kv_bytes"] for r in run["ranks"]}
    assert kv == {"rank=0": round(12.13 * GIB), "rank=1": round(12.13 * GIB),
                  "rank=2": round(11.33 * GIB), "rank=3": round(11.33 * GIB)}  # fmt: skip
    assert run["engine"]["kv_tokens"] == 807792 and run["engine"]["max_concurrency_tokens"] == 1024
