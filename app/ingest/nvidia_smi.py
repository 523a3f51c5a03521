"""Parse nvidia-smi output: per-GPU total / used / free memory, driver, CUDA, other processes.

Pure: text in, data out; never raises on a str. Three formats, also mixed in one paste:
- `nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free,driver_version
  --format=csv[,noheader][,nounits]` (any subset/order of columns when the header is present;
  without a header the documented order above is assumed and said so in a finding);
- the default `nvidia-smi` table (GPU rows "used MiB / total MiB", "Driver Version" and "CUDA
  Version" from the banner, the "Processes:" table with or without GI/CI columns);
- `nvidia-smi --query-compute-apps=pid,used_memory[,gpu_uuid|gpu_bus_id|process_name]
  --format=csv[,noheader][,nounits]`.
nvidia-smi prints memory in MiB; bytes = MiB × 2**20 exactly. The table prints no free figure:
free = total − used there (flagged `free_derived`). Processes are attached to a GPU by index
(table), uuid or PCI bus id (CSV); the rest stay in `processes` (unassigned).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.ingest.vllm_log_model import Finding, finding_to_json

MIB = 2**20

_DRIVER = re.compile(r"Driver Version:\s*([\w.]{1,32})")
_CUDA = re.compile(r"CUDA Version:\s*([\w.]{1,32})")
_GPU_ROW = re.compile(
    r"^\|\s*(\d{1,3})\s+(.*?)\s+(On|Off|N/A)\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
)
_MEM_ROW = re.compile(r"\|\s*(\d{1,9})\s*MiB\s*/\s*(\d{1,9})\s*MiB\s*\|")
_PROC_ROW = re.compile(
    r"^\|\s*(\d{1,3})\s+(?:(N/A|\d{1,4})\s+(N/A|\d{1,4})\s+)?(\d{1,10})\s+([CGM](?:\+[CGM])?)\s+(.*?)\s+"
    r"(?:(\d{1,9})\s*MiB|N/A)\s*\|"
)
_UNIT = re.compile(r"\s*\[([A-Za-z%]{1,8})\]\s*$")
_BUS = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_MIB_VALUE = re.compile(r"^(\d{1,12})(?:\s*MiB)?$")
_GPU_COLS = ("index", "name", "memory.total", "memory.used", "memory.free", "driver_version")


@dataclass(frozen=True)
class SmiProcess:
    pid: int | None
    used_bytes: int | None
    name: str | None
    gpu_index: int | None
    gpu_uuid: str | None
    gpu_bus_id: str | None
    line: int


@dataclass(frozen=True)
class SmiGpu:
    index: int | None
    name: str | None
    total_bytes: int | None
    used_bytes: int | None
    free_bytes: int | None
    free_derived: bool
    driver_version: str | None
    cuda_version: str | None
    uuid: str | None
    bus_id: str | None
    other_processes: tuple[SmiProcess, ...]
    line: int


@dataclass(frozen=True)
class SmiParse:
    gpus: tuple[SmiGpu, ...]
    processes: tuple[SmiProcess, ...]
    formats: tuple[str, ...]
    findings: tuple[Finding, ...]


def _mib(value: str) -> int | None:
    m = _MIB_VALUE.match(value.strip())
    return int(m[1]) * MIB if m else None


def _int(value: str) -> int | None:
    v = value.strip()
    return int(v) if v.isdecimal() and len(v) < 16 else None  # not isdigit: int("²") raises


def _text(value: str) -> str | None:
    v = value.strip()
    return None if not v or v.startswith("[") or v in ("N/A", "[N/A]") else v


def _bus_key(bus: str | None) -> str | None:
    return bus.lower().split(":", 1)[-1] if bus and bus.count(":") == 2 else (bus.lower() if bus else None)


class _Acc:
    def __init__(self) -> None:
        self.gpus: list[SmiGpu] = []
        self.procs: list[SmiProcess] = []
        self.formats: list[str] = []
        self.findings: list[Finding] = []

    def fmt(self, name: str) -> None:
        if name not in self.formats:
            self.formats.append(name)


def _gpu(**kw: object) -> SmiGpu:
    base: dict[str, object] = dict.fromkeys(
        ("index", "name", "total_bytes", "used_bytes", "free_bytes", "driver_version", "cuda_version", "uuid", "bus_id")
    )
    base.update(free_derived=False, other_processes=(), line=0)
    base.update(kw)
    return SmiGpu(**base)  # type: ignore[arg-type]


def _table(lines: list[str], acc: _Acc) -> None:
    driver = cuda = None
    in_procs = False
    pending: dict[str, object] | None = None
    for n, line in enumerate(lines, 1):
        if driver is None and (m := _DRIVER.search(line)):
            driver = m[1]
        if cuda is None and (m := _CUDA.search(line)):
            cuda = None if m[1] == "N/A" else m[1]
        if "Processes:" in line:
            in_procs = True
            continue
        if in_procs:
            p = _PROC_ROW.match(line)
            if p:
                used = int(p[7]) * MIB if p[7] else None
                acc.procs.append(SmiProcess(int(p[4]), used, p[6].strip() or None, int(p[1]), None, None, n))
            continue
        g = _GPU_ROW.match(line)
        if g:
            pending = {"index": int(g[1]), "name": g[2].strip() or None, "bus_id": g[4], "line": n}
            continue
        mem = _MEM_ROW.search(line)
        if mem and pending is not None:
            used, total = int(mem[1]) * MIB, int(mem[2]) * MIB
            acc.gpus.append(
                _gpu(**pending, used_bytes=used, total_bytes=total, free_bytes=total - used, free_derived=True)
            )
            pending = None
    if acc.gpus or acc.procs:
        acc.fmt("table")
        acc.gpus[:] = [replace(g, driver_version=driver, cuda_version=cuda) for g in acc.gpus]


def _columns(header: str) -> list[str]:
    out = []
    for raw in header.split(","):
        name = _UNIT.sub("", raw.strip()).strip().lower()
        out.append(
            {"used_gpu_memory": "used_memory", "pci.bus_id": "bus_id", "gpu_bus_id": "gpu_bus_id"}.get(name, name)
        )
    return out


def _csv_row(cols: list[str], fields: list[str], n: int, acc: _Acc) -> None:
    row = dict(zip(cols, fields, strict=False))
    if "pid" in row:
        acc.procs.append(
            SmiProcess(
                _int(row["pid"]),
                _mib(row.get("used_memory", "")),
                _text(row.get("process_name", row.get("name", ""))),
                None,
                _text(row.get("gpu_uuid", "")),
                _text(row.get("gpu_bus_id", "")),
                n,
            )
        )
        return
    total, used, free = (_mib(row.get(k, "")) for k in ("memory.total", "memory.used", "memory.free"))
    if total is None and used is None and free is None and "index" not in row:
        return
    derived = free is None and total is not None and used is not None
    acc.gpus.append(
        _gpu(
            index=_int(row.get("index", "")),
            name=_text(row.get("name", "")),
            total_bytes=total,
            used_bytes=used,
            free_bytes=(total - used) if derived and total is not None and used is not None else free,
            free_derived=derived,
            driver_version=_text(row.get("driver_version", "")),
            uuid=_text(row.get("uuid", row.get("gpu_uuid", ""))),
            bus_id=_text(row.get("bus_id", "")),
            line=n,
        )
    )


def _guess_columns(fields: list[str]) -> list[str] | None:
    """Columns of a noheader row: the documented --query-gpu order, or a compute-apps row."""
    if len(fields) == 6 and _int(fields[0]) is not None and all(_mib(f) is not None for f in fields[2:5]):
        return list(_GPU_COLS)
    cols: list[str] = []
    for f in fields:
        v = f.strip()
        if v.startswith("GPU-"):
            cols.append("gpu_uuid")
        elif _BUS.match(v):
            cols.append("gpu_bus_id")
        elif "pid" not in cols and _int(v) is not None:
            cols.append("pid")
        elif "pid" in cols and _mib(v) is not None:
            cols.append("used_memory")
        else:
            cols.append("process_name")
    return cols if "pid" in cols and "used_memory" in cols and 2 <= len(fields) <= 4 else None


def _csv(lines: list[str], acc: _Acc) -> None:
    cols: list[str] | None = None
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if "," not in s or s.startswith("|"):
            cols = None if not s else cols
            continue
        low = s.lower()
        if (
            "memory.total" in low
            or "memory.free" in low
            or low.startswith(("index,", "pid,", "gpu_uuid,", "gpu_bus_id,"))
        ):
            cols = _columns(s)
            acc.fmt("csv-apps" if "pid" in cols else "csv-gpu")
            continue
        fields = [f.strip() for f in s.split(",")]
        use = cols
        if use is None:
            use = _guess_columns(fields)
            if use is None:
                continue
            kind = "csv-apps-noheader" if "pid" in use else "csv-gpu-noheader"
            if kind not in acc.formats:
                acc.fmt(kind)
                acc.findings.append(
                    Finding("assumed_column_order", f"CSV without a header: columns read as {', '.join(use)}", n)
                )
        _csv_row(use, fields, n, acc)


def _attach(acc: _Acc) -> tuple[list[SmiGpu], list[SmiProcess]]:
    by_index = {g.index: i for i, g in enumerate(acc.gpus) if g.index is not None}
    by_uuid = {g.uuid: i for i, g in enumerate(acc.gpus) if g.uuid}
    by_bus = {_bus_key(g.bus_id): i for i, g in enumerate(acc.gpus) if g.bus_id}
    owned: dict[int, list[SmiProcess]] = {}
    loose: list[SmiProcess] = []
    for p in acc.procs:
        i = (
            by_index.get(p.gpu_index)
            if p.gpu_index is not None
            else by_uuid.get(p.gpu_uuid)
            if p.gpu_uuid
            else by_bus.get(_bus_key(p.gpu_bus_id))
        )
        if i is None:
            loose.append(p)
        else:
            owned.setdefault(i, []).append(p)
    gpus = [replace(g, other_processes=tuple(owned.get(i, ()))) for i, g in enumerate(acc.gpus)]
    return gpus, loose


def parse_nvidia_smi(text: str) -> SmiParse:
    """Parse nvidia-smi output (table, --query-gpu CSV, --query-compute-apps CSV, or a mix)."""
    if not isinstance(text, str):
        return SmiParse((), (), (), (Finding("not_text", "the input is not text", None, "error"),))
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    acc = _Acc()
    try:
        if "MiB /" in text or "Processes:" in text or "NVIDIA-SMI" in text:
            _table(lines, acc)
        _csv(lines, acc)
        gpus, loose = _attach(acc)
    except Exception as exc:  # a parser bug must not become a 500
        acc.findings.append(Finding("parser_error", f"{type(exc).__name__}: {exc}", None, "error"))
        gpus, loose = [], []
    if not gpus and not loose:
        acc.findings.append(
            Finding(
                "no_nvidia_smi_data",
                "no GPU rows found; expected `nvidia-smi` table output, `nvidia-smi --query-gpu=index,name,"
                "memory.total,memory.used,memory.free,driver_version --format=csv` or "
                "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`",
                None,
                "warning",
            )
        )
    elif loose and gpus:
        acc.findings.append(
            Finding("unassigned_processes", f"{len(loose)} processes could not be matched to a GPU", None)
        )
    return SmiParse(tuple(gpus), tuple(loose), tuple(acc.formats), tuple(acc.findings))


def smi_free_spread_alert(gpus: Sequence[SmiGpu], threshold_bytes: int) -> list[Finding]:
    """Seed 000's alert: free memory at start differs across GPUs by more than the threshold."""
    known = [g for g in gpus if g.free_bytes is not None]
    if len(known) < 2:
        return []
    lo = min(known, key=lambda g: g.free_bytes or 0)
    hi = max(known, key=lambda g: g.free_bytes or 0)
    assert lo.free_bytes is not None and hi.free_bytes is not None
    spread = hi.free_bytes - lo.free_bytes
    if spread <= threshold_bytes:
        return []
    return [
        Finding(
            "free_memory_spread",
            f"free memory at start differs by {spread / 2**30:.2f} GiB across GPUs (GPU {lo.index}: "
            f"{lo.free_bytes / 2**30:.2f} GiB, GPU {hi.index}: {hi.free_bytes / 2**30:.2f} GiB), more than the "
            f"{threshold_bytes / 2**30:.2f} GiB policy: with --gpu-memory-utilization of the total (vLLM >= 0.9.1) "
            "it matters only on a GPU whose free memory is below the requested budget (vLLM will not start there); "
            "before 0.9.1, or with a manual --kv-cache-memory-bytes, the tightest GPU limits every rank",
            None,
            "warning",
            {
                "spread_bytes": spread,
                "threshold_bytes": threshold_bytes,
                "min_free_bytes": lo.free_bytes,
                "min_gpu": lo.index,
                "max_free_bytes": hi.free_bytes,
                "max_gpu": hi.index,
            },
        )
    ]


def _process_json(p: SmiProcess) -> dict[str, object]:
    return {
        "pid": p.pid,
        "used_bytes": p.used_bytes,
        "name": p.name,
        "gpu_index": p.gpu_index,
        "gpu_uuid": p.gpu_uuid,
        "gpu_bus_id": p.gpu_bus_id,
        "line": p.line,
    }


def smi_parse_to_json(p: SmiParse) -> dict[str, object]:
    return {
        "gpus": [
            {
                "index": g.index,
                "name": g.name,
                "total_bytes": g.total_bytes,
                "used_bytes": g.used_bytes,
                "free_bytes": g.free_bytes,
                "free_at_start_bytes": g.free_bytes,
                "free_derived": g.free_derived,
                "driver_version": g.driver_version,
                "cuda_version": g.cuda_version,
                "uuid": g.uuid,
                "bus_id": g.bus_id,
                "other_processes": [_process_json(x) for x in g.other_processes],
                "line": g.line,
                "tolerance_bytes": MIB // 2,
            }
            for g in p.gpus
        ],
        "processes": [_process_json(x) for x in p.processes],
        "formats": list(p.formats),
        "findings": [finding_to_json(f) for f in p.findings],
    }
