"""A downgrade that would drop stored rows refuses unless forced (issue 12 item 8).

`alembic downgrade` below the migration that created a table drops it with every row in it.
Each such migration's `downgrade()` calls `refuse_data_loss(tables)` first: when any of those
tables holds a row, it raises with the count and how to force it — `alembic -x force=yes
downgrade …`, or `KVLEDGER_DOWNGRADE_FORCE=1` in the environment (also what `command.downgrade`
callers set). Empty tables drop silently: there is nothing to lose.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

FORCE_ENV = "KVLEDGER_DOWNGRADE_FORCE"


class DataLossRefused(RuntimeError):
    """A downgrade would have deleted stored rows and was not forced."""


def forced() -> bool:
    given = context.get_x_argument(as_dictionary=True).get("force", "")
    return os.environ.get(FORCE_ENV, "") in ("1", "yes", "true") or given in ("1", "yes", "true")


def refuse_data_loss(tables: Sequence[str], loses: str = "drops tables that hold data") -> None:
    """Raise DataLossRefused when a table this downgrade drops (or strips of columns: `loses` says
    what it does to them) holds rows and the run is not forced."""
    if forced():
        return
    bind = op.get_bind()
    existing = set(sa.inspect(bind).get_table_names())
    counts = {t: int(bind.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one()) for t in tables if t in existing}
    held = {t: n for t, n in counts.items() if n}
    if held:
        rows = ", ".join(f"{t}: {n:,} rows" for t, n in held.items())
        raise DataLossRefused(
            f"this downgrade {loses} ({rows}); nothing was changed. Back the database "
            f"up first, then force it with `alembic -x force=yes downgrade …` or {FORCE_ENV}=1."
        )
