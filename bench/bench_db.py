"""Storage benchmark: with 10,000 ledgers of 8 ranks stored, the history list (one page) and a
diff of two ledgers must each answer in under 100 ms.

    .venv/bin/python bench/bench_db.py                  # a fresh SQLite file in a temp folder
    .venv/bin/python bench/bench_db.py --url URL        # any empty database (e.g. PostgreSQL)

Each timed operation opens its own session, as a web request would, and is repeated; the
median and the worst run are reported. Exit status 1 if a worst run misses the target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker
from timing import median_p95_max

from app.core.audit import LedgerRow, alerts, diff_ledgers
from app.db import repository as repo
from app.db.session import make_engine, make_sessionmaker, upgrade_to_head

GIB = 1024**3
MIB = 1024**2
TARGET_MS = 100.0
DEPLOYMENT = "bench"


def _ledger(i: int, log: str) -> repo.LedgerIn:
    ranks = [
        LedgerRow(
            rank=str(r),
            total_bytes=80 * GIB,
            free_at_start_bytes=79 * GIB - (i % 7) * MIB,
            requested_bytes=72 * GIB,
            weights_bytes=16 * GIB,
            non_torch_bytes=GIB + r * MIB,
            cuda_graph_bytes=3 * GIB,
            activation_bytes=2 * GIB + (i % 13) * MIB,
            kv_bytes=50 * GIB - (i % 13) * MIB - r * MIB,
            num_gpu_blocks=100_000 - i % 13,
        )
        for r in range(8)
    ]
    evidence = {"vllm_version": "0.21.0" if i % 2 else "0.20.1", "block_size": 16, "tp": 8}
    return repo.LedgerIn(ranks=ranks, evidence=evidence, note=f"ledger {i}", source_log=log)


def fill(factory: sessionmaker[Session], count: int, batch: int = 500) -> list[int]:
    log = "INFO vllm: Memory profiling takes 7.12 seconds\n" * 80  # ~4 KiB per ledger
    ids: list[int] = []
    with factory.begin() as s:
        repo.create_deployment(s, DEPLOYMENT, "Bench", "Qwen/Qwen3-32B", "TP8", "8× H100")
    for start in range(0, count, batch):
        with factory.begin() as s:
            ids += [repo.add_ledger(s, DEPLOYMENT, _ledger(i, log)) for i in range(start, min(count, start + batch))]
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="an empty database URL (default: a temporary SQLite file)")
    parser.add_argument("--ledgers", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--check", action="store_true", help="exit 1 when a case misses the target (default: report)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'bench.sqlite3'}"
        upgrade_to_head(url)
        engine = make_engine(url)
        reads, writes = make_sessionmaker(engine), make_sessionmaker(engine, write=True)
        t0 = time.perf_counter()
        ids = fill(writes, args.ledgers)
        fill_s = time.perf_counter() - t0

        def page(offset: int) -> Callable[[], object]:
            def run() -> object:
                with reads() as s:
                    return repo.count_ledgers(s, DEPLOYMENT), repo.list_ledgers(s, DEPLOYMENT, 50, offset)

            return run

        def diff() -> object:
            with reads() as s:
                a = repo.to_snapshot(repo.get_ledger(s, ids[len(ids) // 3], with_source_log=False))
                b = repo.to_snapshot(repo.get_ledger(s, ids[-1], with_source_log=False))
            return diff_ledgers(a, b), alerts(b, GIB, GIB, 0.1)

        def diff_with_logs() -> object:
            with reads() as s:
                a = repo.to_snapshot(repo.get_ledger(s, ids[len(ids) // 3]))
                b = repo.to_snapshot(repo.get_ledger(s, ids[-1]))
            return diff_ledgers(a, b)

        results = {
            "history list, newest page (count + 50 ledgers with ranks)": median_p95_max(page(0), args.repeats),
            "history list, page at offset 5,000": median_p95_max(page(5_000), args.repeats),
            "diff of two ledgers (load both + diff + alerts)": median_p95_max(diff, args.repeats),
            "diff of two ledgers, source logs loaded too": median_p95_max(diff_with_logs, args.repeats),
        }
        engine.dispose()
    print(f"database: {engine.dialect.name}; {args.ledgers:,} ledgers × 8 ranks stored in {fill_s:.1f} s")
    print(f"| operation | median ms | p95 ms | worst ms | worst / {TARGET_MS:.0f} ms | worst < {TARGET_MS:.0f} ms |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    ok = True
    for name, (median, p95, worst) in results.items():
        ok &= worst < TARGET_MS
        verdict = "yes" if worst < TARGET_MS else "NO"
        print(f"| {name} | {median:.2f} | {p95:.2f} | {worst:.2f} | {worst / TARGET_MS:.2f} | {verdict} |")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
