"""Byte-for-byte comparison of slider fragments between two trees (a tick-path change must not change them).

    # in each tree, with the same venv (PYTHONPATH names the tree whose app runs):
    PYTHONPATH=/tmp/before .venv/bin/python bench/fragments.py dump /tmp/before.jsonl
    PYTHONPATH=.           .venv/bin/python bench/fragments.py dump /tmp/after.jsonl
    .venv/bin/python bench/fragments.py compare /tmp/before.jsonl /tmp/after.jsonl

`dump` writes, for N seeded random what-if queries (seven models, five GPUs, TP/PP given, TP alone or
neither, utilization, prefill chunk, KV dtype, max_model_len, live tokens, growth, ranks), the htmx
fragment of `/plan` (status, body, HX-Replace-Url), one JSON line each. `compare` lists the queries
whose three differ.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import urllib.parse
import warnings
from pathlib import Path

MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b", "gemma-2-9b-it", "mistral-7b-v0.3", "deepseek-v2-lite",
          "llama-3.1-405b")
GPUS = ("H100 80GB", "A100 40GB", "L40S 48GB", "L4 24GB", "H200 141GB")


def queries(n: int, seed: int = 20261203) -> list[dict[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        query = {"model": rng.choice(MODELS), "util": f"{rng.randint(30, 99) / 100:.2f}"}
        if rng.random() < 0.5:
            query["gpu"] = rng.choice(GPUS)
        layout = rng.random()
        if layout < 0.45:
            query["tp"], query["pp"] = str(rng.choice([1, 2, 4, 8])), str(rng.choice([1, 1, 2]))
        elif layout < 0.8:
            query["tp"] = str(rng.choice([1, 2, 4, 8]))
        if rng.random() < 0.5:
            query["mnbt"] = str(256 * rng.randint(1, 64))
        if rng.random() < 0.2:
            query["kv_dtype"] = "fp8"
        if rng.random() < 0.15:
            query["max_model_len"] = str(rng.choice([4096, 32768]))
        if rng.random() < 0.1:
            query["live"] = str(rng.choice([2000, 12000]))
        if rng.random() < 0.1:
            query["growth"] = "0.1"
        if rng.random() < 0.05:
            query["ranks"] = str(rng.choice([16, 64]))
        out.append(query)
    return out


def dump(path: Path, n: int) -> None:
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

    from app.settings import Settings
    from app.web.app import create_app

    app = create_app(Settings(database_url="sqlite://"))
    with TestClient(app) as client, path.open("w", encoding="utf-8") as out:
        for query in queries(n):
            response = client.get("/plan?" + urllib.parse.urlencode(query), headers={"HX-Request": "true"})
            out.write(json.dumps({"q": query, "status": response.status_code, "body": response.text,
                                  "replace": response.headers.get("HX-Replace-Url")}) + "\n")


def compare(before: Path, after: Path) -> int:
    a = [json.loads(line) for line in before.read_text(encoding="utf-8").splitlines()]
    b = [json.loads(line) for line in after.read_text(encoding="utf-8").splitlines()]
    if [x["q"] for x in a] != [y["q"] for y in b]:
        print("the two dumps are of different queries")
        return 2
    differ = [x["q"] for x, y in zip(a, b, strict=True)
              if (x["status"], x["body"], x["replace"]) != (y["status"], y["body"], y["replace"])]
    print(f"{len(a)} queries, {len(a) - len(differ)} byte-identical, {len(differ)} differ")
    for query in differ:
        print("  ", urllib.parse.urlencode(query))
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("-n", type=int, default=300)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.out, args.n)
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
