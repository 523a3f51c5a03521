"""History benchmark through the web app: with 10,000 ledgers of 8 ranks stored (SQLite), the
deployment history page (the list: one page of 50 ledgers, chart, alerts) and a ledger diff
page must each answer in under 100 ms.

    .venv/bin/python bench/bench_history.py                 # a fresh SQLite file in a temp folder
    .venv/bin/python bench/bench_history.py --url URL        # any empty database

Requests go through the whole app (middleware, routing, session per request, rendering) with
Starlette's TestClient, one at a time; one warm-up, then `--repeats` runs of each. The median,
95th percentile and worst run are reported. Exit status 1 if a median misses the target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from bench_db import DEPLOYMENT, fill  # bench/ is the script's folder
from timing import median_p95_max

from app.db.session import make_engine, make_sessionmaker
from app.services.demo_data import prepare_database
from app.settings import Settings
from app.web.app import create_app

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

TARGET_MS = 100.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", help="an empty database URL (default: a temporary SQLite file)")
    parser.add_argument("--ledgers", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--check", action="store_true", help="exit 1 when a case misses the target (default: report)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(database_url=args.url or f"sqlite:///{Path(tmp) / 'bench.sqlite3'}", demo_data=False)
        prepare_database(settings)
        engine = make_engine(settings.database_url)
        t0 = time.perf_counter()
        ids = fill(make_sessionmaker(engine, write=True), args.ledgers)
        fill_s = time.perf_counter() - t0
        engine.dispose()
        a, b = ids[len(ids) // 3], ids[-1]
        with TestClient(create_app(settings)) as client:

            def get(path: str) -> Callable[[], object]:
                def run() -> object:
                    response = client.get(path)
                    assert response.status_code == 200, (path, response.status_code)
                    return response

                return run

            pages = {
                f"history page /d/{DEPLOYMENT} (50 ledgers, chart, alerts)": f"/d/{DEPLOYMENT}",
                f"history page, page 100 (/d/{DEPLOYMENT}?page=100)": f"/d/{DEPLOYMENT}?page=100",
                f"history JSON twin /d/{DEPLOYMENT}.json": f"/d/{DEPLOYMENT}.json",
                f"ledger diff page /diff?a={a}&b={b}": f"/diff?a={a}&b={b}&max_model_len=32768",
                "ledger diff JSON twin": f"/diff.json?a={a}&b={b}&max_model_len=32768",
                f"ledger page /l/{b} (with its source log)": f"/l/{b}",
            }
            results = {name: median_p95_max(get(path), args.repeats) for name, path in pages.items()}
            sizes = {name: len(client.get(path).content) for name, path in pages.items()}
    print(
        f"database: {settings.database_url.split(':', 1)[0]}; {args.ledgers:,} ledgers × 8 ranks "
        f"stored in {fill_s:.1f} s; {args.repeats} requests each after a warm-up"
    )
    target = f"{TARGET_MS:.0f} ms"
    print(f"| request | bytes | median ms | p95 ms | worst ms | median / {target} | median < {target} |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    ok = True
    for name, (median, p95, worst) in results.items():
        ok &= median < TARGET_MS
        print(
            f"| {name} | {sizes[name]:,} | {median:.2f} | {p95:.2f} | {worst:.2f} | {median / TARGET_MS:.2f} | "
            f"{'yes' if median < TARGET_MS else 'NO'} |"
        )
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
