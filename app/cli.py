"""The `kvledger` command: the same core as the dashboard and the API.

Bad input exits with status 2 and one line naming the field and what is wrong; never a
traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from app.core.errors import InputError
from app.core.units import fmt_bytes
from app.settings import SettingsError

MAX_INPUT_BYTES = 20 * 1024 * 1024


class _ExportFormats(Sequence[str]):
    """`app.core.exports.FORMATS`, imported when `export` checks or shows its choices, not when the
    parser is built: app.core.exports imports the planner (app.core.plan, 0.2-0.5 s), which
    `import-log` and the other commands do not need."""

    def __getitem__(self, index: Any) -> Any:
        from app.core.exports import FORMATS

        return FORMATS[index]

    def __len__(self) -> int:
        from app.core.exports import FORMATS

        return len(FORMATS)


class CliError(Exception):
    """A problem with the command's input, reported as one line with exit status 2."""


def read_text(path: str, what: str = "file") -> str:
    """Read a file (or '-' for standard input), refusing unreadable and oversized input."""
    if path == "-":
        data = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    else:
        p = Path(path)
        try:
            if p.stat().st_size > MAX_INPUT_BYTES:
                raise CliError(f"{path}: the {what} is larger than 20 MB ({p.stat().st_size:,} bytes); refused")
            # A hard cap on what is read, not st_size: /dev/zero, pipes and /proc files report 0.
            with p.open("rb") as fh:
                data = fh.read(MAX_INPUT_BYTES + 1)
        except CliError:
            raise
        except IsADirectoryError:
            raise CliError(f"{path}: is a directory, not a {what}") from None
        except OSError as exc:
            raise CliError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise CliError(f"{path}: the {what} is larger than 20 MB; refused")
    return data.decode("utf-8", errors="replace")


def read_json(path: str, what: str = "JSON file") -> Any:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:  # the stdlib decoder recurses once per nested [ or {
        raise CliError(f"{path}: the {what} nests arrays/objects too deeply to read; refused") from None


def emit(obj: object) -> None:
    """JSON on stdout, indented by 2. orjson writes it (64 MB for a 15 MB log's import-log: 0.3 s,
    not 4 s); what orjson refuses (an int past 64 bits, a non-str key) the stdlib writes."""
    try:
        data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        sys.stdout.write(json.dumps(obj, indent=2) + "\n")
        return
    buffer = getattr(sys.stdout, "buffer", None)  # a captured stdout (tests) has none
    if buffer is None:
        sys.stdout.write(data.decode())
        return
    sys.stdout.flush()
    buffer.write(data)
    buffer.flush()


_TABLE_BYTES = (
    "total_bytes",
    "requested_bytes",
    "headroom_bytes",
    "weights_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "activation_bytes",
    "kv_bytes",
)


def _groups_line(result: dict[str, Any], shown: int) -> str:
    """What the grouped form's rows stand for (each row is the first rank of a group)."""
    groups, omitted = result.get("rank_groups") or [], result.get("rank_groups_omitted") or 0
    pairs = zip(result["ranks"][:8], groups[:8], strict=True)
    spans = "; ".join(f"{r['rank']}: {g['count']:,} ({g['ranks']})" for r, g in pairs)
    more = f", {omitted:,} more left out" if omitted else ""
    return (f"{result['layout']['ranks']:,} ranks in {len(groups) + omitted:,} groups of identical ranks, one row "
            f"each ({shown} of {len(groups)} shown{more}): {spans}{' …' if len(groups) > 8 else ''}")


def _plan_table(result: dict[str, Any]) -> str:
    lines = [
        f"model {result['model']['name'] or '?'}  vLLM {result['vllm_version']}  "
        f"TP{result['layout']['tp']} PP{result['layout']['pp']}  {result['kv_bytes_per_token']:,} B/token/rank  "
        f"page {result['page_bytes']:,} B ({result['block_size']} tokens)",
        "",
        f"{'rank':>10} "
        + " ".join(f"{h:>11}" for h in ("total", "requested", "headroom", "weights", "non_torch", "graphs"))
        + " ".join(f"{h:>11}" for h in ("activation", "kv"))
        + f" {'blocks':>9} {'tokens':>11} {'stranded':>10}  start",
    ]
    shown = result["ranks"][:64]
    for r in shown:
        mark = "*" if r["binding"] else " "
        cells = [fmt_bytes(r[k]) for k in _TABLE_BYTES]
        lines.append(
            f"{r['rank'][:9]:>9}{mark} "
            + " ".join(f"{c:>11}" for c in cells)
            + f" {r['blocks']:>9,} {r['tokens']:>11,} {fmt_bytes(r['stranded_bytes']):>10}  "
            + ("yes" if r["will_start"] else "NO")
        )
    if result.get("ranks_form") == "grouped":
        lines.append(_groups_line(result, len(shown)))
    elif len(result["ranks"]) > len(shown):
        lines.append(f"… {len(result['ranks']) - len(shown)} more ranks (use --json for all)")
    ub = result["uniform_budget"]
    lines += [
        "",
        f"binding rank {result['binding_rank']}: {result['binding_reason']}",
        f"tokens {result['tokens']:,} (raw {result['raw_tokens'] or 0:,}), "
        f"schedulable {result['schedulable_tokens']:,}, "
        "concurrency ceiling "
        + (f"{result['concurrency_ceiling']:,}" if result["concurrency_ceiling"] is not None
           else "not set (give policy.avg_live_tokens)")
        + f", binding limit {result['binding_limit']}",
        f"vLLM max concurrency at {result['engine']['max_model_len']:,} tokens: "
        f"{result['max_concurrency_at_max_model_len']:.2f}x "
        f"(derived 'GPU KV cache size' {result['vllm_kv_cache_size_tokens']:,})",
        f"fits max_model_len: {'yes' if result['fits_max_model_len'] else 'NO'}; largest that fits "
        f"{result['largest_max_model_len']:,}; stranded {fmt_bytes(result['stranded_bytes'])}",
    ]
    if ub and ub["kv_cache_memory_bytes"] <= 0:  # --kv-cache-memory-bytes 0 gives vLLM no cache blocks
        lines.append(f"uniform budget: none to deploy ({ub['in_flags_reason']})")
    elif ub:
        lines.append(
            f"uniform budget {ub['flag']} ({fmt_bytes(ub['kv_cache_memory_bytes'])}), stranded "
            f"{fmt_bytes(ub['stranded_bytes'])}, min/median {ub['min_over_median'] or 0:.3f}"
        )
    lines.append("flags: " + " ".join(result["flags"]))
    lines += [f"warning [{w['code']}] {w['message']}" for w in result.get("warning_groups") or result["warnings"]]
    lines += [f"note: {note}" for note in result.get("notes") or []]
    for lever in result.get("levers") or []:
        caveat = "" if lever.get("will_start", True) else " (will not start)"
        caveat += "".join(f"; {c}" for c in lever.get("caveats") or [])
        lines.append(f"lever {lever['knob']} {lever['change']}: {lever['tokens_gained']:+,} tokens{caveat}")
    return "\n".join(lines)


def cmd_plan(args: argparse.Namespace) -> int:
    from app.services.plans import run_plan

    doc = read_json(args.file, "plan document")
    result = run_plan(doc, read_log=lambda p: read_text(p, "log file"), check=args.check)
    print(json.dumps(result, indent=2) if args.json else _plan_table(result))
    if not args.check:
        return 0
    failed = [c for c in result["checks"] if not c["ok"]]
    if not args.json:
        for c in failed:
            print(f"CHECK FAILED {c['check']}: {c['reason']}")
        print(f"checks: {len(result['checks']) - len(failed)} of {len(result['checks'])} pass")
    return 1 if failed else 0


def cmd_size(args: argparse.Namespace) -> int:
    from app.cli_size import render
    from app.services.sizing import run_size

    doc = read_json(args.file, "sizing document")
    if args.allow_long_max_model_len and isinstance(doc, dict) and isinstance(doc.get("engine", {}), dict):
        doc["engine"] = {**doc.get("engine", {}), "allow_long_max_model_len": True}  # else the field's own error
    text, status = render(run_size(doc), args.json)
    print(text)
    return status


def cmd_kv_bytes(args: argparse.Namespace) -> int:
    from app.services.model_input import kv_bytes_report

    config = read_json(args.config, "config.json")
    if not isinstance(config, dict):
        raise CliError(f"{args.config}: a config.json must be a JSON object")
    report = kv_bytes_report(
        config,
        tp=args.tp,
        pp=args.pp,
        dcp=args.dcp,
        kv_cache_dtype=args.kv_cache_dtype,
        block_size=args.block_size,
        max_model_len=args.max_model_len,
        max_num_batched_tokens=args.max_num_batched_tokens,
        vllm_version=args.vllm_version,
        gpu=args.gpu,
        mla_disable=args.mla_disable,
        allow_long_max_model_len=args.allow_long_max_model_len,
    )
    if args.json:
        emit(report)
    else:
        for key, value in report.items():
            print(f"{key:>32}: {value}")
    return 0


def cmd_import_log(args: argparse.Namespace) -> int:
    from app.ingest.vllm_log_model import gc_paused

    config = read_json(args.config, "config.json") if args.config else None
    text = read_text(args.file, "log file")
    # The cyclic collector stays off from the parse to the last byte written (the parse pauses it
    # too, and each resumption walked the whole parsed heap: 0.1-0.3 s for 15 MB); nothing built
    # here forms a cycle, and what was built is freed (by reference counts) before it resumes.
    with gc_paused():
        runs = _import_log_output(text, config, args.json)
    return 0 if runs else 1  # an empty, binary or non-vLLM file: the finding says what was looked for


def _import_log_output(text: str, config: Any, as_json: bool) -> int:
    # services.imports.import_log's two steps (tests/ingest/test_import_log_cli.py checks the output
    # is the same), without importing that module: its plan building imports pydantic and the
    # schemas (≈ 0.4 s of an import-log's interpreter start), which the residuals do not need.
    from app.services.evidence import parse_log_text
    from app.services.log_residuals import add_residuals

    parsed = parse_log_text(text)
    add_residuals(parsed.get("runs", []), config)
    runs = len(parsed.get("runs", []))
    if as_json:
        emit(parsed)
        return runs
    out: list[str] = []
    for i, run in enumerate(parsed["runs"]):
        out.extend(_run_lines(i, run))
    out.extend(f"finding [{f['code']}] {f['message']}" for f in parsed.get("findings", []))
    if out:
        sys.stdout.write("\n".join(out) + "\n")  # one write, not one print per line
    return runs


def _run_lines(i: int, run: dict[str, Any]) -> list[str]:
    """The text form of one parsed run (`kvledger import-log` without --json)."""
    version = run.get("vllm_version")
    inferred = run.get("version") or {}
    if version is None and inferred.get("inferred_min"):
        upper = inferred.get("inferred_max_exclusive")
        version = f"≥{inferred['inferred_min']}" + (f" <{upper}" if upper else "") + " (inferred)"
    out = [f"run {i}: vLLM {version or '?'}  model {run['settings'].get('model') or '?'}"]
    for r in run["ranks"]:
        # non-torch and CUDA graphs where the log states them (--json had them; the text left them out)
        stated = "".join(f"  {name} {fmt_bytes(r[key])}" for name, key in
                         (("non-torch", "non_torch_bytes"), ("cuda graphs", "cuda_graph_bytes"))
                         if r.get(key) is not None)  # fmt: skip
        out.append(
            f"  {r['rank']:>12}  total {fmt_bytes(r.get('total_bytes'))}"
            f"  weights {fmt_bytes(r.get('weights_bytes'))}"
            f"  activation {fmt_bytes(r.get('activation_bytes'))}{stated}  kv {fmt_bytes(r.get('kv_bytes'))}"
        )
    engine = run.get("engine") or {}
    said = [f"{engine['num_gpu_blocks']:,} blocks"] if engine.get("num_gpu_blocks") is not None else []
    if engine.get("kv_tokens") is not None:  # "GPU KV cache size: N tokens" (V1): a log may print no blocks
        said.append(f"{engine['kv_tokens']:,} tokens")
    if engine.get("max_concurrency") is not None and engine.get("max_concurrency_tokens") is not None:
        said.append(f"max concurrency {engine['max_concurrency']:g}x at {engine['max_concurrency_tokens']:,} tokens")
    if said:
        out.append(f"  engine: {', '.join(said)}")
    residual = (run.get("residuals") or {}).get("engine")
    if residual and residual.get("residual_blocks") is not None:
        out.append(
            f"  recomputed {residual['computed_blocks']:,} blocks from the KV bytes (residual "
            f"{residual['residual_blocks']:+,}, printed precision ±{residual['tolerance_blocks']})"
        )
    room = (run.get("residuals") or {}).get("kv_room_from_blocks")
    if room:  # a run that states no KV memory: the room its logged blocks give (services.blocks_room)
        size = fmt_bytes(room["kv_room_bytes"])
        out.append(f"  kv room {size} per rank, {room['tokens']:,} tokens ({room['basis']})")
    out.extend(f"  finding [{f['code']}] {f['message']}" for f in run.get("findings", []))
    return out


def cmd_import_smi(args: argparse.Namespace) -> int:
    from app.services.imports import import_nvidia_smi

    out = import_nvidia_smi(read_text(args.file, "nvidia-smi output"))
    emit(out)
    return 0 if out["gpus"] or out["processes"] else 1  # nothing read: the finding says what was expected


def cmd_models(args: argparse.Namespace) -> int:
    from app.services.model_input import catalogue_search

    models = catalogue_search(args.query or "", limit=1000)
    if args.json:
        emit(models)
    else:
        for m in models:
            print(f"{m['slug']:<36} {m['hf_id']:<52} {m['evidence']}")
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    from app.core.gpus import preset_rows

    rows = preset_rows()
    if args.json:
        emit(rows)
    else:
        for r in rows:
            print(f"{r['name']:<22} {int(str(r['total_bytes'])) / 2**30:>7.2f} GiB  {r['source']}")
    return 0


def cmd_padding(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from app.core.padding import compare_padding

    lengths = read_json(args.file, "lengths file")
    if not isinstance(lengths, list):
        raise CliError(f"{args.file}: expected a JSON list of sequence lengths")
    emit(asdict(compare_padding(lengths, args.block_size)))
    return 0


#: `kvledger simulate`'s default cap on requests_per_level × len(ramp): the run takes both ramps (with and
#: without the shared prefix) at about 1-4k requests a second on one core, so 200,000 is a minute or two;
#: `--max-work` raises it (0: no cap). The web's POST /api/v1/simulate answers at most 20,000 in the request.
CLI_MAX_WORK = 200_000


def _progress_on_stderr(fraction: float) -> None:
    sys.stderr.write(f"\rsimulating: {fraction:.0%} of the levels")
    sys.stderr.flush()


def cmd_simulate(args: argparse.Namespace) -> int:
    from app.services.simulation import run_simulation

    cap = None if args.max_work == 0 else args.max_work
    progress = _progress_on_stderr if sys.stderr.isatty() else None
    try:
        out = run_simulation(read_json(args.file, "simulation document"), max_work=cap, progress=progress)
    except InputError as exc:
        if cap is not None and "exceeds the limit" in exc.message:
            raise InputError(exc.field, f"{exc.message} (kvledger simulate's --max-work; 0 for no limit: "
                                        "about 1-4k requests a second)") from None
        raise
    finally:
        if progress is not None:
            sys.stderr.write("\n")
    emit(out)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from app.services.deploy import export_plan

    doc = read_json(args.plan, "plan document")
    sys.stdout.write(export_plan(doc, args.format).text)
    return 0


def cmd_import_metrics(args: argparse.Namespace) -> int:
    from app.services.deploy import import_metrics

    plan = read_json(args.plan, "plan document") if args.plan else None
    out = import_metrics(read_text(args.file, "metrics file"), plan)
    if args.json:
        emit(out)
        return 0
    for rep in out["replicas"]:
        where = ", ".join(f"{k}={v}" for k, v in rep["replica"].items()) or "the engine"
        usage = "?" if rep["kv_cache_usage"] is None else f"{rep['kv_cache_usage']:.1%}"
        line = (f"{where} ({rep['model_name'] or 'model not named'}): {rep['num_gpu_blocks'] or '?'} blocks of "
                f"{rep['block_size'] or '?'} tokens, KV usage {usage}")
        if rep.get("plan"):
            line += f"; plan predicts {rep['plan']['predicted_blocks']} blocks"
        print(line)
    for gpu in out["gpus"]:
        free = "?" if gpu["free_bytes"] is None else fmt_bytes(gpu["free_bytes"])
        mig = f" (MIG {gpu['mig_instance']})" if gpu.get("mig_instance") else ""
        print(f"GPU {gpu['gpu']}{mig} {gpu['name'] or ''}: free {free}")
    for rep in out["replicas"]:
        for side, mix in rep["length_mix"].items():
            if mix and mix.get("note"):
                print(f"{side}: {mix['note']}")
    for r in out["refused"]:
        print(f"not used: {r['series']} {r['value']}: {r['reason']}")
    if out["refused_count"] > len(out["refused"]):
        print(f"not used: {out['refused_count'] - len(out['refused'])} more samples")
    return 0


def _int_in(lo: int, hi: int | None, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number from `lo` to `hi` (None: no upper bound); argparse prints the
    message, naming the value, and exits 2."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
        if value < lo or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value

    return parse


#: --port: a TCP port (70000 reached asyncio's bind and printed an OverflowError traceback)
_port = _int_in(1, 65535, "a TCP port from 1 to 65535")
_workers = _int_in(1, 64, "a whole number from 1 to 64")
_non_negative_int = _int_in(0, None, "a whole number >= 0")


def cmd_serve(args: argparse.Namespace) -> int:
    from app.settings import Settings
    from app.web.app import serve

    workers = f", {args.workers} workers" if args.workers > 1 else ""
    print(f"KV Ledger on http://{args.host}:{args.port} (database {Settings.from_env().database_url}{workers})",
          flush=True)
    serve(args.host, args.port, args.workers)  # migrates the database and seeds demo data into an empty one first
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from app.db.session import upgrade_to_head
    from app.settings import Settings

    url = Settings.from_env().database_url
    upgrade_to_head(url)
    print(f"database at the latest migration: {url}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvledger", description="KV-cache capacity planning for vLLM deployments")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plan", help="compute a plan document (JSON file or - for stdin)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--check", action="store_true",
        help="gate a deployment: exit 1 with the reasons when a rank will not start, max_model_len does not fit "
        "or a policy reserve is breached",
    )
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("size", help="the smallest deployments that serve a target (sizing document, file or -)")
    p.add_argument("file")
    p.add_argument("--allow-long-max-model-len", action="store_true",
                   help="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a target max_model_len above the model's own, as vLLM warns "
                   "(the document's engine.allow_long_max_model_len)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_size)

    p = sub.add_parser("kv-bytes", help="per-rank KV bytes per token of a config.json")
    p.add_argument("config")
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dcp", type=int, default=1)
    p.add_argument("--kv-cache-dtype", default="auto")
    p.add_argument("--block-size", type=int, help="default 16 (an MLA backend may pick another: --gpu)")
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-batched-tokens", type=int)
    p.add_argument("--vllm-version", help="size as this vLLM release does (MLA: latent from 0.7.1); default current")
    p.add_argument("--gpu", help="the card (H100, B200, A100, …): picks vLLM's MLA block size")
    p.add_argument("--mla-disable", action="store_true", help="VLLM_MLA_DISABLE=1: an MLA model caches full K/V")
    p.add_argument("--allow-long-max-model-len", action="store_true",
                   help="VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a --max-model-len above the model's own, as vLLM warns")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_kv_bytes)

    p = sub.add_parser("import-log", help="parse a vLLM startup log (file or -); exit 1 when it holds no vLLM run")
    p.add_argument("file")
    p.add_argument("--config", help="the model's config.json, for residuals")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_import_log)

    p = sub.add_parser("import-smi", help="parse nvidia-smi output (file or -); exit 1 when it holds no GPU row")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_import_smi)

    p = sub.add_parser("models", help="list the model catalogue")
    p.add_argument("query", nargs="?")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_models)

    p = sub.add_parser("gpus", help="list the GPU presets (total memory as vLLM sees it, with sources)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_gpus)

    p = sub.add_parser("padding", help="padded batch vs paged blocks for a JSON list of lengths")
    p.add_argument("file")
    p.add_argument("--block-size", type=int, default=16)
    p.set_defaults(func=cmd_padding)

    p = sub.add_parser("simulate", help="ramp concurrency against the paged pool (JSON file or -)")
    p.add_argument("file")
    p.add_argument("--max-work", type=_non_negative_int, default=CLI_MAX_WORK, metavar="N",
                   help="the most requests_per_level x len(ramp) to run (default %(default)s; 0: no limit)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_simulate)

    p = sub.add_parser("export", help="a plan in a deploy format: vllm serve, vLLM --config YAML, KServe, Helm, CSV")
    p.add_argument("plan", help="plan document (JSON file or - for stdin)")
    p.add_argument("--format", required=True, choices=_ExportFormats(), metavar="FORMAT", help="one of: %(choices)s")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import-metrics", help="read vLLM's /metrics text or DCGM exporter metrics (file or -)")
    p.add_argument("file")
    p.add_argument("--plan", help="a plan document to put the measured blocks beside")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_import_metrics)

    p = sub.add_parser("serve", help="run the dashboard")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=_port, default=8000)
    p.add_argument("--workers", type=_workers, default=1,
                   help="server processes, 1-64 (jobs, caps and rate limits are shared through the database)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("db", help="database maintenance")
    p.add_argument("action", choices=["upgrade"])
    p.set_defaults(func=cmd_db)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    from app.services.memo import PlanMemo, using  # stdlib-only: import-log stays light

    try:
        with using(PlanMemo()):  # one command's pure sub-results reused across its plans (size: ~3x)
            return func(args)
    except InputError as exc:
        # a message that opens with the name the user wrote (InputError.as_written) says where already
        named = bool(exc.field) and exc.message.startswith((f"{exc.field} ", f"{exc.field}: "))
        print(f"kvledger: error: {exc.message}" if named else f"kvledger: error: {exc.field or 'input'}: {exc.message}",
              file=sys.stderr)
    except CliError as exc:
        print(f"kvledger: error: {exc}", file=sys.stderr)
    except SettingsError as exc:
        print(f"kvledger: error: {exc}", file=sys.stderr)
    except BrokenPipeError:
        return 0
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
