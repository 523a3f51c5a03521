"""`kvledger` on a JSON file nested past the stdlib decoder's recursion limit: one line naming the
file, exit 2, no traceback (it printed a RecursionError traceback and exited 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEEP = '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}"


@pytest.mark.parametrize("command", [["plan"], ["size"], ["simulate"], ["kv-bytes"], ["padding"],
                                     ["export", "--format", "serve"]])
def test_deeply_nested_json_is_refused(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    proc = subprocess.run([sys.executable, "-m", "app.cli", *command, str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    what = _what(command[0])
    expected = f"kvledger: error: {path}: the {what} nests arrays/objects too deeply to read; refused"
    assert proc.stderr.strip() == expected


def _what(command: str) -> str:
    return {"plan": "plan document", "size": "sizing document", "simulate": "simulation document",
            "kv-bytes": "config.json", "padding": "lengths file", "export": "plan document"}[command]
