"""GPU presets: names, nvidia-smi product strings, unknown names, the listing."""

from __future__ import annotations

import pytest

from app.core.errors import InputError
from app.core.gpus import DEFAULT_GPU, PRESETS, find_preset, preset_rows, resolve_gpu
from app.schemas import validate_plan

GIB = 1024**3


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("H100 80GB", "H100 80GB"),
        ("h100-80gb", "H100 80GB"),
        ("NVIDIA H100 80GB HBM3", "H100 80GB"),
        ("  nvidia   h100 80gb hbm3 ", "H100 80GB"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090 24GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA L40S", "L40S 48GB"),
        ("NVIDIA H200", "H200 141GB"),
        ("NVIDIA B200", "B200 192GB"),
    ],
)
def test_names_and_product_strings(name: str, preset: str) -> None:
    found = find_preset(name)
    assert found is not None and found.name == preset


def test_totals_are_the_sourced_ones() -> None:
    # /work/shared/data/gpu-totals.md
    totals = {p.name: p.total_bytes / GIB for p in PRESETS}
    assert round(totals["H100 80GB"], 2) == 79.19 and round(totals["L40S 48GB"], 2) == 44.42
    assert round(totals["RTX 3090 24GB"], 2) == 23.58 and round(totals["H200 141GB"], 2) == 139.81
    assert all(p.source for p in PRESETS) and DEFAULT_GPU == "H100 80GB"


def test_unknown_gpu_lists_the_nearest() -> None:
    with pytest.raises(InputError) as err:
        resolve_gpu("H100 81GB")
    assert err.value.field == "gpu.name" and "H100 80GB" in err.value.message


def test_plan_document_takes_a_gpu_by_name() -> None:
    doc = validate_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "NVIDIA H100 80GB HBM3"}})
    assert doc.gpu is not None and doc.gpu.total == resolve_gpu("H100 80GB").total_bytes
    with pytest.raises(InputError) as err:
        validate_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "Tesla T4"}})
    assert err.value.field == "gpu.name"
    with pytest.raises(InputError) as err:
        validate_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": {}})
    assert err.value.field == "gpu.total"


def test_preset_rows_contract() -> None:
    rows = preset_rows()
    assert {"name", "total_bytes", "aliases", "source"} <= set(rows[0])
    assert len({r["name"] for r in rows}) == len(rows)


def test_kvledger_gpus_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from app.cli import main

    assert main(["gpus", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    h100 = next(r for r in rows if r["name"] == "H100 80GB")
    assert h100["total_bytes"] == resolve_gpu("NVIDIA H100 80GB HBM3").total_bytes and h100["source"]


def test_nvidia_smi_import_maps_cards_to_preset_totals() -> None:
    from pathlib import Path

    from app.services.imports import import_nvidia_smi

    text = (Path(__file__).resolve().parents[1] / "data" / "nvidia-smi" / "table-r550-4gpu.txt").read_text()
    out = import_nvidia_smi(text)
    gpu = out["gpus"][0]
    assert gpu["preset"] == "H100 80GB" and gpu["vllm_total_bytes"] == resolve_gpu("H100 80GB").total_bytes
    assert any(f["code"] == "gpu_preset_total" and "H100 80GB preset" in f["message"] for f in out["findings"])


def test_compute_capability_by_family() -> None:
    from app.core.gpus import PRESETS, compute_capability

    assert compute_capability("NVIDIA A100-SXM4-80GB") == (8, 0)
    assert compute_capability("RTX 3090 24GB") == (8, 6) and compute_capability("A10 24GB") == (8, 6)
    assert compute_capability("L40S 48GB") == (8, 9) and compute_capability("NVIDIA GeForce RTX 4090") == (8, 9)
    assert compute_capability("NVIDIA H100 80GB HBM3") == (9, 0) and compute_capability("H20 141GB") == (9, 0)
    assert compute_capability("B200 192GB") == (10, 0) and compute_capability("RTX 5090 32GB") == (12, 0)
    assert compute_capability("MI300X 192GB") is None and compute_capability(None) is None
    # every NVIDIA preset has one
    assert all(compute_capability(p.name) for p in PRESETS if not p.name.startswith("MI"))
