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
| KVLEDGER_DEMO_DATA | demo_data | 1/0, true/false, yes/no, on/off |
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
}
ENV = {name: f"KVLEDGER_{name.upper()}" for name in (
    "database_url", "write_token", "max_body_bytes", "max_log_bytes", "sim_max_work", "demo_data",
    "import_time_limit_s")}


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
    #: Seconds one request may spend reading a pasted log (in a child process) before it is stopped.
    import_time_limit_s: float = 30.0

    def __post_init__(self) -> None:
        for name, (low, high) in RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
                raise SettingsError(f"{ENV.get(name, name)}: must be a number from {low:,g} to {high:,g}, "
                                    f"got {value!r}")
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
