"""`vllm serve`'s LoRA and speculative-decoding flags → the plan's `engine.lora` / `engine.speculative`.

These flags were kept in `other_flags` ("flags the plan does not model"), so a command with
`--enable-lora --max-loras 4 --max-lora-rank 64` or `--speculative-config '{...}'` was planned
without the LoRA slots, the draft's weights and its KV. They now fill the sections a plan document
states itself, with vLLM's defaults where the command leaves a field out (vLLM read at 28be48fa9):

- LoRA: `EngineArgs.create_engine_config` (vllm/engine/arg_utils.py) builds a `LoRAConfig` only
  `if self.enable_lora`; `--max-cpu-loras` of 0 or less is None. `LoRAConfig` (vllm/config/lora.py)
  defaults `max_loras = 1`, `max_lora_rank = 16`, `max_cpu_loras = max_loras`.
- Speculative: `--speculative-config` is `json.loads`ed; `--spec-method/--spec-model/--spec-tokens`
  fill its `method/model/num_speculative_tokens` and are refused beside the same key
  (`EngineArgs.create_speculative_config`). `SpeculativeConfig.__post_init__`
  (vllm/config/speculative.py) infers the method: a model with a dot and no slash is a custom class,
  no method is `ngram` for the model "ngram"/"[ngram]" else `draft_model`, the MTP model types are
  `mtp`, and a draft model whose name holds "eagle-" / "eagle3" is `eagle` / `eagle3`.

Whatever the plan does not model stays named: other LoRA flags stay in `other_flags`, and the keys
of `--speculative-config` the plan does not size are listed in a note.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from app.core.errors import InputError
from app.core.speculative import METHODS
from app.ingest.vllm_serve_values import model_match


class ServeReading(Protocol):
    """The parts of `app.ingest.vllm_serve.ServeReading` these readers fill (a protocol, so this module
    does not import the reader that calls it)."""

    engine: dict[str, Any]
    other_flags: list[dict[str, Any]]
    notes: list[str]
    written: dict[str, str]

LORA_FLAGS = ("--enable-lora", "--max-loras", "--max-lora-rank", "--max-cpu-loras", "--lora-target-modules")
#: `--spec-*` flag → the `--speculative-config` key it fills (EngineArgs.create_speculative_config).
SPEC_KEYS = {"--spec-method": "method", "--spec-model": "model", "--spec-tokens": "num_speculative_tokens"}
SPEC_FLAGS = ("--speculative-config", *SPEC_KEYS)
#: vllm/config/speculative.py MTPModelTypes @28be48fa9: each is read as "mtp" (with a warning).
MTP_TYPES = frozenset({
    "deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp",
    "exaone_moe_mtp", "exaone4_5_mtp", "qwen3_next_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "hy_v3_mtp", "gemma4_mtp",
})  # fmt: skip
_PLANNED_KEYS = ("method", "model", "num_speculative_tokens")


def _take(reading: ServeReading, names: tuple[str, ...]) -> list[dict[str, Any]]:
    """The reading's other flags of `names`, removed from `other_flags` (in the command's order)."""
    taken = [f for f in reading.other_flags if f.get("vllm_flag") in names]
    reading.other_flags = [f for f in reading.other_flags if f.get("vllm_flag") not in names]
    return taken


def _int(value: object, where: str) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise InputError(where, f"expected an integer, got {value!r}") from None


def read_lora(reading: ServeReading, where: str) -> None:
    """`--enable-lora` with `--max-loras` / `--max-lora-rank` / `--max-cpu-loras` / `--lora-target-modules`
    → `engine.lora`. `--lora-target-modules` is `LoRAConfig.target_modules: list[str] | None`, so vLLM's
    parser takes every word up to the next flag (nargs="+", vllm/engine/arg_utils.py
    collection_to_kwargs @28be48fa9): `--lora-target-modules q_proj v_proj` is both modules."""
    given = _take(reading, LORA_FLAGS)
    if not given:
        return
    enabled = False
    for f in given:
        if f["vllm_flag"] == "--enable-lora":
            enabled = not str(f["flag"]).startswith("--no-")
    sizes = [f for f in given if f["vllm_flag"] != "--enable-lora"]
    if not enabled:
        if sizes:
            shown = ", ".join(f"{f['flag']} {f['value']}" for f in sizes)
            reading.notes.append(f"{shown} without --enable-lora: vLLM makes no LoRA slots (EngineArgs builds "
                                 "LoRAConfig only when enable_lora is set), so the plan has none")
        return
    lora: dict[str, Any] = {"max_loras": 1, "max_lora_rank": 16}  # LoRAConfig's defaults (vllm/config/lora.py)
    for f in sizes:
        key = str(f["vllm_flag"]).removeprefix("--").replace("-", "_")
        if key == "lora_target_modules":
            lora["target_modules"] = str(f["value"] or "").split()  # none given: vLLM's parser refuses it
            reading.written["engine.lora.target_modules"] = str(f["flag"])
            reading.notes.append(f"{f['flag']} {f['value'] or ''}: the LoRA slots are sized for these modules only "
                                 "(the plan's flags and exports write it too)")
            continue
        number = _int(f["value"], f"{where} {f['flag']}")
        if key == "max_cpu_loras" and number <= 0:
            lora.pop(key, None)  # vLLM: `max_cpu_loras if max_cpu_loras and max_cpu_loras > 0 else None`
            continue
        lora[key] = number
        reading.written[f"engine.lora.{key}"] = str(f["flag"])
    reading.engine["lora"] = lora


def _body(given: list[dict[str, Any]], where: str) -> dict[str, Any]:
    """`--speculative-config`'s JSON object with the `--spec-*` flags (and `--speculative-config.KEY`) in it."""
    body: dict[str, Any] = {}
    for f in given:
        if f["flag"] in ("--speculative-config", "-sc"):
            try:
                parsed = json.loads(str(f["value"]))
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                raise InputError(f"{where} {f['flag']}", "expected a JSON object of SpeculativeConfig fields, e.g. "
                                 f"'{{\"method\": \"ngram\", \"num_speculative_tokens\": 4}}', got {f['value']!r:.80}")
            body.update(parsed)
    for f in given:
        flag = str(f["flag"])
        key = SPEC_KEYS.get(flag) or (flag.partition(".")[2] if "." in flag else None)
        if key is None:
            continue
        if key in body and flag in SPEC_KEYS:
            raise InputError(f"{where} {flag}", f"{flag} and --speculative-config['{key}'] are mutually exclusive "
                                                "(vLLM refuses both)")
        body[key] = f["value"]
    return body


def _method(body: dict[str, Any]) -> str:
    """SpeculativeConfig.__post_init__'s method (vllm/config/speculative.py @28be48fa9)."""
    method, model = body.get("method"), body.get("model")
    if isinstance(model, str) and "." in model and "/" not in model and not model.startswith(
            ("http://", "https://", "file://")):
        return "custom_class"
    if method is None:
        method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    method = "mtp" if method in MTP_TYPES else "ngram" if method == "[ngram]" else str(method)
    if method == "draft_model" and isinstance(model, str):
        name = model.lower()
        method = "eagle" if "eagle-" in name else "eagle3" if "eagle3" in name else "dflash" if "dflash" in name \
            else method
    return method


def read_speculative(reading: ServeReading, where: str) -> None:
    """`--speculative-config` (and `--spec-method/--spec-model/--spec-tokens`) → `engine.speculative`."""
    given = _take(reading, SPEC_FLAGS)
    if not given:
        return
    field = f"{where} {given[0]['flag']}"
    body = _body(given, where)
    method = _method(body)
    if method not in METHODS:
        reading.other_flags.extend(given)  # named in the plan's notes with the flags it does not model
        reading.notes.append(f"speculative method {method!r} (vLLM's SpeculativeConfig) is not one the plan sizes "
                             f"({', '.join(METHODS)}): its draft weights and KV are not in the plan")
        return
    spec: dict[str, Any] = {"method": method}
    tokens = body.get("num_speculative_tokens")
    if tokens is not None:
        if isinstance(tokens, bool):
            raise InputError(field, f"num_speculative_tokens: expected an integer, got {tokens!r}")
        spec["num_speculative_tokens"] = _int(tokens, field)
        reading.written["engine.speculative.num_speculative_tokens"] = str(given[0]["flag"])
    model = body.get("model")
    if method in ("eagle", "eagle3", "draft_model") and model is not None:
        slug, _ = model_match(str(model))
        if slug is None:
            raise InputError(field, f"draft model {model!r} is not in the catalogue, so the plan cannot size its "
                                    "weights and KV: give engine.speculative.model.config (its config.json) in a "
                                    "plan document beside serve")
        spec["model"] = {"catalogue": slug, "name": str(model)}
    rest = [k for k in body if k not in _PLANNED_KEYS]
    if method in ("mtp", "ngram") and model is not None and model not in ("ngram", "[ngram]"):
        rest.insert(0, "model")
    if rest:
        reading.notes.append("--speculative-config keys the plan does not model (not in its flags or exports: add "
                             f"them to the command you deploy): {', '.join(rest)}")
    reading.engine["speculative"] = spec
