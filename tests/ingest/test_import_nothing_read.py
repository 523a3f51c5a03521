"""`kvledger import-log` / `import-smi` on a file that holds nothing they read (empty, binary, a
JSON file, a truncated first line) printed only a finding and exited 0, so a script took the
import as done; they now exit 1 (the output and its finding unchanged). Through the entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

LOGS = Path(__file__).parents[1] / "data" / "vllm-logs"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("content", [b"", bytes(range(256)) * 8, b'{"text": 1}', b"INFO 12-02 Available KV cach"])
def test_nothing_read_exits_1_with_the_finding(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "input.txt"
    path.write_bytes(content)
    log = _run("import-log", "--json", str(path))
    assert log.returncode == 1, log.stderr
    assert [f["code"] for f in json.loads(log.stdout)["findings"]] == ["no_vllm_memory_lines"]
    smi = _run("import-smi", str(path))
    assert smi.returncode == 1, smi.stderr
    assert [f["code"] for f in json.loads(smi.stdout)["findings"]] == ["no_nvidia_smi_data"]


def test_a_real_log_still_exits_0() -> None:
    proc = _run("import-log", str(LOGS / "01-v064-llama31-8b-rtx3090-tp1.log"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("run 0: vLLM ≥0.6.4 <0.6.5 (inferred)")
