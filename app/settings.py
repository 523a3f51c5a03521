"""Runtime settings, read once from the environment and injected into the app factory."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path


def _default_database_url() -> str:
    path = Path(os.environ.get("KVLEDGER_DATA_DIR", "var")) / "kvledger.sqlite3"
    return f"sqlite:///{path}"


@dataclass(frozen=True)
class Settings:
    """Everything the web app and the database layer may be configured with."""

    database_url: str = field(default_factory=_default_database_url)
    write_token: str | None = None
    max_body_bytes: int = 2 * 1024 * 1024
    max_log_bytes: int = 20 * 1024 * 1024
    sim_max_work: int = 200_000
    demo_data: bool = True
    sqlite_busy_timeout_ms: int = 10_000

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        defaults = cls()
        return cls(
            database_url=env.get("KVLEDGER_DATABASE_URL", defaults.database_url),
            write_token=env.get("KVLEDGER_WRITE_TOKEN") or None,
            max_body_bytes=int(env.get("KVLEDGER_MAX_BODY_BYTES", defaults.max_body_bytes)),
            max_log_bytes=int(env.get("KVLEDGER_MAX_LOG_BYTES", defaults.max_log_bytes)),
            sim_max_work=int(env.get("KVLEDGER_SIM_MAX_WORK", defaults.sim_max_work)),
            demo_data=env.get("KVLEDGER_DEMO_DATA", "1") not in ("0", "false", "no"),
        )
