"""`kvledger size FILE|- [--json]`: the sizing answer as a table (or its JSON contract).

Exit status: 0 when an option meets the target, 1 when none does (the near misses say what each
lacks), 2 for bad input (one line naming the field, from `app.cli.main`).
"""

from __future__ import annotations

import json
from typing import Any


def size_table(out: dict[str, Any]) -> str:
    """The ranked options, the near misses and what was searched, one line each."""
    lines = [out["message"], *out.get("notes", []), ""]
    if out["options"]:
        lines.append(f"{'#':>3} {'GPUs':>4}  {'layout':<40} {'KV':<6} {'weights':<8} {'util':>5} "
                     f"{'tokens/engine':>13} {'concurrency':>11} {'headroom':>8}")  # fmt: skip
    for i, o in enumerate(out["options"], 1):
        layout = f"{o['label']} × {o['dp']}"
        lines.append(f"{i:>3} {o['gpus']:>4}  {layout:<40} {o['kv_cache_dtype']:<6} {o['quantization'] or '-':<8} "
                     f"{o['gpu_memory_utilization']:>5g} {o['tokens']:>13,} {o['concurrency']:>11,} "
                     f"{o['headroom_text']:>8}")  # fmt: skip
        if o["processes"] > 1:  # vLLM's DP ranks never share a GPU: one process per engine on a card
            lines.append(f"      run {o['processes']} such vllm serve processes on the same GPUs, each its own --port:")
        if o.get("env"):  # the environment vLLM must start with (app.core.exports.env_of)
            lines.append("      env: " + " ".join(f"{k}={v}" for k, v in sorted(o["env"].items())))
        lines.append(f"      {' '.join(o['flags'])}")
        lines.append(f"      {o['url']}")
    if out["feasible"] > len(out["options"]):
        lines.append(f"… {out['feasible'] - len(out['options'])} more options (raise `limit`)")
    for m in out["near_misses"]:
        lines.append(f"near miss: {m['missing']}")
    lines.append(f"searched {out['searched']:,} candidates ({out['evaluated']:,} engine plans computed, "
                 f"{out['skipped']:,} skipped, {out['excluded_count']:,} refused by the model's rules)")  # fmt: skip
    lines += [f"refused: {e['reason']}" for e in out["excluded"][:5]]
    return "\n".join(lines)


def render(out: dict[str, Any], as_json: bool) -> tuple[str, int]:
    return (json.dumps(out, indent=2) if as_json else size_table(out)), (0 if out["options"] else 1)
