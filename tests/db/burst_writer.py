"""A write burst for the crash test: run as a child process, killed with SIGKILL mid-burst.

    python -m tests.db.burst_writer URL COUNT      (from the repository root)

Saves plans (and every fourth write a ledger of 8 ranks with a 64 KiB log) one transaction at a
time, and prints ``plan <slug>`` / ``ledger <id>`` only after each commit has returned: every
printed line is an acknowledged write that must survive the kill.
"""

from __future__ import annotations

import sys

from sqlalchemy.orm import Session, sessionmaker

from app.db import repository as repo
from app.db.session import make_engine, make_sessionmaker

from .factories import ledger_in


def _write(factory: sessionmaker[Session], i: int) -> str:
    """One acknowledged write; returns its acknowledgement line."""
    with factory() as session, session.begin():
        if i % 4 == 3:
            ledger = ledger_in(note=f"burst {i}", log=f"line {i}\n" * 8000)
            ledger_id = repo.add_ledger(session, "burst", ledger)
            ack = f"ledger {ledger_id}"
        else:
            ack = "plan " + repo.save_plan(session, {"i": i, "padding": "p" * 4000}, {"i": i}, "0.1.0")
    return ack  # only after the commit above returned


def main(argv: list[str]) -> int:
    url, count = argv[1], int(argv[2])
    engine = make_engine(url)
    factory = make_sessionmaker(engine, write=True)
    print("ready", flush=True)
    for i in range(count):
        print(_write(factory, i), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
