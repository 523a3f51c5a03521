"""The sampler warm-up after KV sizing (app.core.profile_run `sampler_warmup`) on the rows each log prints.

What vLLM v0.19 does between the profile and the warm-up (read at @4dd49b06f):
- `memory_profiling` (vllm/utils/mem_utils.py) runs `gc.collect()` and `torch.accelerator.empty_cache()`
  after `profile_run` and `profile_cudagraph_memory`, then measures "Free memory after profiling": what
  torch still reserves beyond the weights then is blocks still in use (tensors kept from the profile run,
  e.g. the modular fused-MoE kernels' `WorkspaceManager` buffer, vllm/v1/worker/workspace.py) and the
  segments they pin.
- `Worker.compile_or_warm_up_model` (vllm/v1/worker/gpu_worker.py): the KV cache is allocated by then;
  `capture_model` (vllm/v1/worker/gpu_model_runner.py) empties the cache before its first
  `mem_get_info` and again after the capture ("took X"); the warm-up then runs `_dummy_run(rows)`
  without graphs and `_dummy_sampler_run` with nothing emptied in between.

So the warm-up has `free at start − requested + peak activation − captured graphs` (the gate's `left`)
minus that retained memory, and the warm-up needs `warmup_need`. This table puts the retained memory the
log itself implies (init free − weights − non-torch increase − free after profiling) beside the margin:
the run fails exactly where margin < retained on every v0.19 log that prints the lines. Nothing here is
fitted; the retained memory is a measurement of the run, not a function of its config (see RESULTS)."""

from __future__ import annotations

import re

from bench_estimates_loo import GIB, JSON, _shape, context
from estimate_cases import CASES, LOGS

from app.core.calibration import DEFAULT
from app.core.profile_run import ProfileInputs, sampler_warmup

_LINES = {
    "free": r"Initial free memory: ([0-9.]+) GiB",
    "requested": r"Requested memory: [0-9.]+ \(util\), ([0-9.]+) GiB",
    "activation": r"torch peak memory increase: ([0-9.]+)GiB",
    "graphs": r"Graph capturing finished in \d+ secs, took ([0-9.]+) GiB",
    "weights": r"weights memory: ([0-9.]+)GiB",
    "non_torch": r"non-torch forward increase memory: ([0-9.]+)GiB",
    "after": r"Free memory after profiling: ([0-9.]+) GiB",
}


def logged_rows(log: str) -> dict[str, float] | None:
    """The GiB figures the warm-up depends on, as the log's first rank prints them; None if one is missing."""
    text = (LOGS / log).read_text(encoding="utf-8")
    found = {key: re.search(pattern, text) for key, pattern in _LINES.items()}
    if any(m is None for m in found.values()):
        return None
    return {key: float(m.group(1)) for key, m in found.items() if m is not None}


def warmup_rows() -> list[JSON]:
    """One row per case whose log prints every line: need, left and margin (logged rows, app.core's rule),
    the retained memory the log implies, and whether the run failed in the warm-up."""
    out: list[JSON] = []
    for case in CASES:
        row = logged_rows(case.log)
        if row is None:
            continue
        shape, _ = _shape(case.model)
        ctx, _ = context(case, DEFAULT)
        inp = ProfileInputs(case.tp, ctx.max_num_batched_tokens, ctx.max_num_seqs, ctx.rules.version)
        cushion = round((row["free"] - row["requested"]) * GIB)
        w = sampler_warmup(shape, inp, cushion, round(row["activation"] * GIB), round(row["graphs"] * GIB))
        if w is None:
            continue
        retained = round((row["free"] - row["weights"] - row["non_torch"] - row["after"]) * GIB)
        out.append({"log": case.log, "model": case.model, "tp": case.tp, "need": w.need, "left": w.left,
                    "margin": w.margin, "retained": retained, "state": w.state,
                    "failed": case.fails == "sampler_warmup"})  # fmt: skip
    return out


def print_warmup_table() -> None:
    rows = warmup_rows()
    print("| log | model | TP | need GiB | left GiB | margin GiB | retained (log) GiB | margin < retained | gate "
          "| warm-up failed |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        short = int(r["margin"]) < int(r["retained"])  # type: ignore[call-overload]
        print(f"| {r['log']} | {r['model']} | {r['tp']} | {int(r['need']) / GIB:.2f} | "  # type: ignore[call-overload]
              f"{int(r['left']) / GIB:.2f} | {int(r['margin']) / GIB:.2f} | "  # type: ignore[call-overload]
              f"{int(r['retained']) / GIB:.2f} | {'yes' if short else 'no'} | {r['state']} | "  # type: ignore[call-overload]
              f"{'yes' if r['failed'] else 'no'} |")  # fmt: skip
    agree = sum((int(r["margin"]) < int(r["retained"])) == r["failed"] for r in rows)  # type: ignore[call-overload]
    failed = [r for r in rows if r["failed"]]
    started = [r for r in rows if not r["failed"]]
    top = max(int(r["margin"]) for r in failed) if failed else 0  # type: ignore[call-overload]
    below = sorted(str(r["log"])[:2] for r in started if int(r["margin"]) < top)  # type: ignore[call-overload]
    print(f"\n{len(rows)} logs: \"margin < the log's own retained memory\" matches the outcome on {agree}; "
          f"started runs with a smaller margin than a failed one: {len(below)} ({', '.join(below) or 'none'}), "
          "so no threshold on the margin alone separates them.")
