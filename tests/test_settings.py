"""One validated settings model: a bad KVLEDGER_* value is one line naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from app.settings import ENV, RANGES, Settings, SettingsError
from tests.server import ROOT


def test_defaults_and_good_values() -> None:
    s = Settings.from_env({"KVLEDGER_DATABASE_URL": "sqlite://", "KVLEDGER_MAX_BODY_BYTES": "4_096",
                           "KVLEDGER_DEMO_DATA": "off", "KVLEDGER_WRITE_TOKEN": ""})
    assert (s.database_url, s.max_body_bytes, s.demo_data, s.write_token) == ("sqlite://", 4096, False, None)
    assert Settings.from_env({}).sim_max_work == 200_000


@pytest.mark.parametrize(("variable", "value", "words"), [
    ("KVLEDGER_MAX_BODY_BYTES", "2MB", "whole number"),
    ("KVLEDGER_MAX_LOG_BYTES", "10", "from 1,024"),
    ("KVLEDGER_SIM_MAX_WORK", "-5", "from 1"),
    ("KVLEDGER_SIM_MAX_WORK", "1e99", "whole number"),
    ("KVLEDGER_DEMO_DATA", "maybe", "1/0, true/false"),
    ("KVLEDGER_DATABASE_URL", " ", "database URL"),
])
def test_bad_values_name_the_variable(variable: str, value: str, words: str) -> None:
    with pytest.raises(SettingsError) as err:
        Settings.from_env({variable: value})
    assert str(err.value).startswith(variable + ":") and words in str(err.value)


def test_every_range_names_its_variable() -> None:
    for name in RANGES:
        assert name in ENV or name == "sqlite_busy_timeout_ms"


def test_cli_prints_one_line_and_exits_2() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KVLEDGER_")}
    env["KVLEDGER_MAX_BODY_BYTES"] = "lots"
    out = subprocess.run([sys.executable, "-m", "app.cli", "db", "upgrade"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "kvledger: error: KVLEDGER_MAX_BODY_BYTES: must be a whole number, got 'lots'"]


def test_job_caps_have_ranges_and_an_order() -> None:
    with pytest.raises(SettingsError, match=r"^KVLEDGER_SIM_WORKERS: must be a number from 1 to 64, got 0$"):
        Settings.from_env({"KVLEDGER_SIM_WORKERS": "0"})
    with pytest.raises(SettingsError, match=r"^KVLEDGER_SIM_RATE_PER_MIN: must be a number"):
        Settings.from_env({"KVLEDGER_SIM_RATE_PER_MIN": "0"})
    with pytest.raises(SettingsError, match=r"^KVLEDGER_SIM_CLIENT_ACTIVE: must be at most KVLEDGER_SIM_MAX_ACTIVE"):
        Settings.from_env({"KVLEDGER_SIM_MAX_ACTIVE": "3", "KVLEDGER_SIM_CLIENT_ACTIVE": "4"})
    s = Settings.from_env({"KVLEDGER_SIM_JOB_TTL_S": "120", "KVLEDGER_SIM_RATE_BURST": "5"})
    assert (s.sim_job_ttl_s, s.sim_rate_burst, s.sim_client_jobs) == (120.0, 5, 20)
