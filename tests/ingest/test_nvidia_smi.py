"""nvidia-smi: the default table (old and new), --query-gpu CSV (header/noheader, units/nounits),
--query-compute-apps CSV, merging by index/uuid/bus id, the free-memory spread alert."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.ingest.nvidia_smi import SmiGpu, parse_nvidia_smi, smi_free_spread_alert, smi_parse_to_json

from .ingest_helpers import SMI, read

MIB = 2**20


def load(name: str) -> dict[str, object]:
    return smi_parse_to_json(parse_nvidia_smi(read(SMI / name)))


def test_table_r550_with_processes() -> None:
    p = parse_nvidia_smi(read(SMI / "table-r550-4gpu.txt"))
    assert p.formats == ("table",) and len(p.gpus) == 4 and p.findings == ()
    g0 = p.gpus[0]
    assert (g0.index, g0.name, g0.bus_id) == (0, "NVIDIA H100 80GB HBM3", "00000000:18:00.0")
    assert (g0.total_bytes, g0.used_bytes, g0.free_bytes) == (81559 * MIB, 12545 * MIB, (81559 - 12545) * MIB)
    assert g0.free_derived and (g0.driver_version, g0.cuda_version) == ("550.54.15", "12.4")
    assert [(x.pid, x.used_bytes, x.name) for x in g0.other_processes] == [(481516, 12536 * MIB, "python3")]
    assert [x.pid for x in p.gpus[3].other_processes] == [2231] and p.gpus[1].other_processes == ()


def test_table_r470_old_layout_truncated_name() -> None:
    p = parse_nvidia_smi(read(SMI / "table-r470-old.txt"))
    (g,) = p.gpus
    assert (g.name, g.total_bytes, g.used_bytes, g.cuda_version) == ("Tesla V100-SXM2...", 16160 * MIB, 0, "11.4")
    assert g.other_processes == () and p.processes == ()


def test_csv_with_header_and_units() -> None:
    p = parse_nvidia_smi(read(SMI / "csv-gpu-header.txt"))
    assert p.formats == ("csv-gpu",)
    g1 = p.gpus[1]
    assert (g1.index, g1.name, g1.total_bytes, g1.used_bytes, g1.free_bytes, g1.driver_version) == (
        1,
        "NVIDIA GeForce RTX 3090",
        24576 * MIB,
        6021 * MIB,
        18224 * MIB,
        "535.104.05",
    )
    assert not g1.free_derived and g1.cuda_version is None


def test_csv_nounits_and_noheader_variants() -> None:
    a = parse_nvidia_smi(read(SMI / "csv-gpu-nounits.txt"))
    assert [g.free_bytes for g in a.gpus] == [45488 * MIB, 45488 * MIB]
    for name in ("csv-gpu-noheader.txt", "csv-gpu-noheader-nounits.txt"):
        p = parse_nvidia_smi(read(SMI / name))
        g0 = p.gpus[0]
        assert (g0.index, g0.total_bytes, g0.used_bytes, g0.free_bytes, g0.driver_version) == (
            0,
            81920 * MIB,
            5 * MIB,
            81037 * MIB,
            "535.183.01",
        )
        assert [f.code for f in p.findings] == ["assumed_column_order"]


def test_compute_apps_alone_and_merged_by_uuid_and_bus_id() -> None:
    apps = parse_nvidia_smi(read(SMI / "csv-apps.txt"))
    assert apps.gpus == () and [(x.pid, x.used_bytes) for x in apps.processes] == [
        (481516, 12536 * MIB),
        (2231, 524 * MIB),
    ]
    mixed = parse_nvidia_smi(read(SMI / "csv-gpu-and-apps-uuid.txt"))
    g0, g1 = mixed.gpus
    assert [(x.pid, x.name) for x in g0.other_processes] == [(481516, "python3")]
    assert [(x.pid, x.used_bytes) for x in g1.other_processes] == [(777, 100 * MIB)]
    assert [x.pid for x in mixed.processes] == [778]
    assert "unassigned_processes" in [f.code for f in mixed.findings]
    assert g0.uuid == "GPU-1a2b3c4d-0000-1111-2222-333344445555"


def test_json_shape() -> None:
    doc = load("table-r550-4gpu.txt")
    gpus = doc["gpus"]
    assert isinstance(gpus, list)
    g = gpus[0]
    assert g["free_at_start_bytes"] == g["free_bytes"] == (81559 - 12545) * MIB
    assert g["other_processes"][0] == {
        "pid": 481516,
        "used_bytes": 12536 * MIB,
        "name": "python3",
        "gpu_index": 0,
        "gpu_uuid": None,
        "gpu_bus_id": None,
        "line": 31,
    }


def test_unparseable_input_gives_empty_and_finding() -> None:
    p = parse_nvidia_smi("command not found: nvidia-smi\n")
    assert p.gpus == () and [f.code for f in p.findings] == ["no_nvidia_smi_data"]


def _gpu(index: int, free_mib: int | None) -> SmiGpu:
    return SmiGpu(
        index,
        "g",
        80 * 1024 * MIB,
        None,
        None if free_mib is None else free_mib * MIB,
        False,
        None,
        None,
        None,
        None,
        (),
        0,
    )


def test_free_spread_alert_threshold() -> None:
    gpus = [_gpu(0, 70000), _gpu(1, 81000), _gpu(2, None)]
    (f,) = smi_free_spread_alert(gpus, threshold_bytes=1024 * MIB)
    assert f.code == "free_memory_spread" and f.numbers["spread_bytes"] == 11000 * MIB
    assert (f.numbers["min_gpu"], f.numbers["max_gpu"]) == (0, 1)
    assert smi_free_spread_alert(gpus, threshold_bytes=11000 * MIB) == []
    assert smi_free_spread_alert([_gpu(0, 1)], threshold_bytes=0) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=400))
def test_never_raises(text: str) -> None:
    p = parse_nvidia_smi(text)
    assert "parser_error" not in [f.code for f in p.findings]
    smi_parse_to_json(p)


def test_a_unicode_digit_index_loses_its_index_not_every_gpu() -> None:
    """'²' is str.isdigit() but not int(): the whole parse was a parser_error and no GPU was read
    (found by test_never_raises with ',²')."""
    text = ("index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB], driver_version\n"
            "\u00b2, NVIDIA H100, 81559 MiB, 0 MiB, 81000 MiB, 550\n0, NVIDIA H100, 81559 MiB, 0 MiB, 81000 MiB, 550\n")
    p = parse_nvidia_smi(text)
    assert "parser_error" not in [f.code for f in p.findings]
    assert [g.index for g in p.gpus] == [None, 0]
    assert "parser_error" not in [f.code for f in parse_nvidia_smi(",\u00b2").findings]
