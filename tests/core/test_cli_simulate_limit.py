"""`kvledger simulate` bounds its work by default: 100 million requests a level ran for hours without a
word (the web answers at most 20,000 in the request); `--max-work` raises the cap, 0 lifts it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import CLI_MAX_WORK


def _doc(tmp_path: Path, requests: int, ramp: list[int]) -> Path:
    path = tmp_path / "sim.json"
    path.write_text(json.dumps({"pool": {"blocks": 1783, "block_size": 16},
                                "workload": {"requests_per_level": requests}, "ramp": ramp, "seed": 2}))
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", "simulate", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_huge_run_is_refused_at_once_naming_the_field_and_the_flag(tmp_path: Path) -> None:
    proc = _run(str(_doc(tmp_path, 100_000_000, [1, 4, 16, 32])))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "workload.requests_per_level" in proc.stderr and "400000000" in proc.stderr
    assert f"limit of {CLI_MAX_WORK}" in proc.stderr and "--max-work" in proc.stderr


def test_the_cap_is_the_product_of_requests_and_levels(tmp_path: Path) -> None:
    path = _doc(tmp_path, 30, [1, 2])
    assert _run(str(path), "--max-work", "59").returncode == 2
    proc = _run(str(path), "--max-work", "60")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["input"]["workload"]["requests_per_level"] == 30
    assert _run(str(path), "--max-work", "0").returncode == 0  # 0: no limit


@pytest.mark.parametrize("bad", ["-1", "ten", "1.5"])
def test_a_bad_cap_is_an_argument_error(tmp_path: Path, bad: str) -> None:
    proc = _run(str(_doc(tmp_path, 10, [1])), "--max-work", bad)
    assert proc.returncode == 2 and "--max-work" in proc.stderr and "Traceback" not in proc.stderr
