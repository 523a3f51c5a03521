"""Runtime settings: one validated model, read once from the environment and injected into the app
factory. A bad `KVLEDGER_*` value is a `SettingsError` naming the variable, what it must be and
what it was (the CLI prints that one line and exits 2; no traceback).

| variable | field | range |
| --- | --- | --- |
| KVLEDGER_DATABASE_URL | database_url | SQLAlchemy URL (default sqlite:///$KVLEDGER_DATA_DIR/kvledger.sqlite3) |
| KVLEDGER_WRITE_TOKEN | write_token | any text; unset or empty = no token |
| KVLEDGER_MAX_BODY_BYTES | max_body_bytes | 1 KiB … 1 GiB |
| KVLEDGER_MAX_LOG_BYTES | max_log_bytes | 1 KiB … 1 GiB |
| KVLEDGER_SIM_MAX_WORK | sim_max_work | 1 … 100,000,000 requests × levels |
| KVLEDGER_IMPORT_TIME_LIMIT_S | import_time_limit_s | 0.01 … 3,600 CPU seconds reading one pasted log |
| KVLEDGER_IMPORT_WALL_LIMIT_S | import_wall_limit_s | 1 … 36,000 s wall-clock for one log import (waiting included) |
| KVLEDGER_DEMO_DATA | demo_data | 1/0, true/false, yes/no, on/off |
| KVLEDGER_SIM_WORKERS | sim_workers | 1 … 64 simulations running at once, all server workers together |
| KVLEDGER_SIM_MAX_ACTIVE | sim_max_active | 1 … 1,000 queued or running jobs, all clients |
| KVLEDGER_SIM_CLIENT_ACTIVE | sim_client_active | 1 … sim_max_active queued or running per client address |
| KVLEDGER_SIM_CLIENT_JOBS | sim_client_jobs | 1 … 10,000 stored jobs per client (its own oldest finished go first) |
| KVLEDGER_SIM_MAX_JOBS | sim_max_jobs | sim_client_jobs … 1,000,000 stored jobs (full: new jobs refused) |
| KVLEDGER_SIM_JOB_TTL_S | sim_job_ttl_s | 60 … 604,800 s a finished job stays readable |
| KVLEDGER_SIM_RATE_PER_MIN | sim_rate_per_min | 0.1 … 10,000 job submissions a minute per client |
| KVLEDGER_SIM_RATE_BURST | sim_rate_burst | 1 … 1,000 submissions at once per client |
| KVLEDGER_BASE_TTL_S | base_ttl_s | 3,600 … 31,536,000 s an unsaved base document lives after its last write |
| KVLEDGER_BASE_CLIENT_BYTES | base_client_bytes | 64 KiB … base_max_bytes of unsaved base documents per client |
| KVLEDGER_BASE_MAX_BYTES | base_max_bytes | 1 MiB … 1 TiB of unsaved base documents in all |
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path


class SettingsError(ValueError):
    """A configuration value out of its range; the message names the variable."""


def _default_database_url() -> str:
    path = Path(os.environ.get("KVLEDGER_DATA_DIR", "var")) / "kvledger.sqlite3"
    return f"sqlite:///{path}"


#: field → (lowest, highest) for the numeric settings.
RANGES: dict[str, tuple[float, float]] = {
    "max_body_bytes": (1024, 1024**3),
    "max_log_bytes": (1024, 1024**3),
    "sim_max_work": (1, 100_000_000),
    "sqlite_busy_timeout_ms": (0, 600_000),
    "import_time_limit_s": (0.01, 3600),
    "import_wall_limit_s": (1, 36000),
    "sim_workers": (1, 64),
    "sim_max_active": (1, 1000),
    "sim_client_active": (1, 1000),
    "sim_client_jobs": (1, 10_000),
    "sim_max_jobs": (1, 1_000_000),
    "sim_job_ttl_s": (60, 7 * 86400),
    "sim_rate_per_min": (0.1, 10_000),
    "sim_rate_burst": (1, 1000),
    "base_ttl_s": (3600, 365 * 86400),
    "base_client_bytes": (64 * 1024, 1024**4),
    "base_max_bytes": (1024**2, 1024**4),
}
#: (smaller, larger): the first may not exceed the second.
ORDERED = (("sim_client_active", "sim_max_active"), ("sim_client_jobs", "sim_max_jobs"),
           ("sim_max_active", "sim_max_jobs"), ("base_client_bytes", "base_max_bytes"))
ENV = {name: f"KVLEDGER_{name.upper()}" for name in (
    "database_url", "write_token", "max_body_bytes", "max_log_bytes", "sim_max_work", "demo_data",
    "import_time_limit_s", "import_wall_limit_s",
    *(name for name in RANGES if name.startswith(("sim_", "base_")) and name != "sim_max_work"))}


@dataclass(frozen=True)
class Settings:
    """Everything the web app and the database layer may be configured with (ranges above)."""

    database_url: str = field(default_factory=_default_database_url)
    write_token: str | None = None
    max_body_bytes: int = 2 * 1024 * 1024
    max_log_bytes: int = 20 * 1024 * 1024
    sim_max_work: int = 200_000
    demo_data: bool = True
    sqlite_busy_timeout_ms: int = 10_000
    #: CPU seconds one request may spend reading a pasted log (in a child process) before it is
    #: stopped, and the wall-clock seconds it may take at most (waiting for a core included).
    import_time_limit_s: float = 30.0
    import_wall_limit_s: float = 600.0
    #: Simulation jobs (app.db.jobs): running at once, queued + running (all / per client), stored
    #: (per client / all), how long a finished one stays readable, and the per-client rate limit.
    sim_workers: int = 1
    sim_max_active: int = 4
    sim_client_active: int = 2
    sim_client_jobs: int = 20
    sim_max_jobs: int = 1000
    sim_job_ttl_s: float = 3600.0
    sim_rate_per_min: float = 30.0
    sim_rate_burst: int = 10
    #: Unsaved base documents (app.db.bases): lifetime after the last write, bytes per client, bytes in all.
    base_ttl_s: float = 30 * 86400.0
    base_client_bytes: int = 8 * 1024 * 1024
    base_max_bytes: int = 512 * 1024 * 1024

    def __post_init__(self) -> None:
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise SettingsError(f"{ENV.get(name, name)}: must be a number from {low:,g} to {high:,g}, "
                                    f"got {value!r}")
        for small, large in ORDERED:
            if getattr(self, small) > getattr(self, large):
                raise SettingsError(f"{ENV[small]}: must be at most {ENV[large]} ({getattr(self, large):,g}), "
                                    f"got {getattr(self, small)!r}")
        if not self.database_url.strip():
            raise SettingsError("KVLEDGER_DATABASE_URL: must be a database URL, got an empty value")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from `KVLEDGER_*` variables; SettingsError naming the first bad one."""
        env = dict(os.environ if environ is None else environ)
        values: dict[str, object] = {}
        types = {f.name: f.type for f in fields(cls)}
        for name, variable in ENV.items():
            raw = env.get(variable)
            if raw is None or (raw == "" and name == "write_token"):
                continue
            values[name] = _PARSERS.get(str(types[name]), _text)(variable, raw)
        return cls(**values)  # type: ignore[arg-type]


def _integer(variable: str, raw: str) -> int:
    try:
        return int(raw.strip().replace("_", ""))
    except ValueError:
        raise SettingsError(f"{variable}: must be a whole number, got {raw!r}") from None


def _number(variable: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise SettingsError(f"{variable}: must be a number, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise SettingsError(f"{variable}: must be a finite number, got {raw!r}")
    return value


def _boolean(variable: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{variable}: must be 1/0, true/false, yes/no or on/off, got {raw!r}")


def _text(variable: str, raw: str) -> str:
    return raw


_PARSERS: dict[str, Callable[[str, str], object]] = {
    "int": _integer, "float": _number, "bool": _boolean, "str": _text, "str | None": _text,
}
