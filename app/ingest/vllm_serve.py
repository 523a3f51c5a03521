"""Read a `vllm serve` command line, a Kubernetes `args:` list or a vLLM `--config` YAML into a plan.

The command is split as a POSIX shell would (`shlex`, line continuations joined, `#` comments
dropped, stopping at `;`, `&`, `|`, `>`; its leading `VAR=value` assignments are the engine's
environment: those the plan sizes with, `ENGINE_ENV`, fill the engine, the others are named in a
note), then read the way
vLLM's `FlexibleArgumentParser.parse_args` reads it (vllm/utils/argparse_utils.py, commit
28be48fa944d): after `serve` the first positional is the model (`--model X` is moved there),
`--long_flag` is `--long-flag`, `--flag=value` is `--flag value`. The flags the plan takes are
`app.core.vllm_flags.PLAN_FLAGS`, with the LoRA and speculative flags gathered into `engine.lora` /
`engine.speculative` (app.ingest.vllm_serve_engine); every other flag vLLM has (app/data/vllm_flags.json) is kept
in `other_flags`, and a flag vLLM does not have in `unknown_flags` — none is dropped silently.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from app.core.errors import InputError
from app.core.vllm_flags import BY_FLAG, MODEL_FLAG, OFFLOAD_FLAGS, PlanFlag, vllm_flag_table
from app.ingest.vllm_serve_engine import read_lora, read_speculative
from app.ingest.vllm_serve_values import ServeValueError, model_match, plan_value

EXPECTED = ("expected a vLLM command line: `vllm serve MODEL [flags]`, "
            "`python -m vllm.entrypoints.openai.api_server --model MODEL [flags]`, "
            "the vllm/vllm-openai image's arguments, or a list of such arguments")
_ENTRYPOINT = re.compile(r"^vllm\.entrypoints\.(openai\.)?api_server$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAX_COMMAND_CHARS = 100_000
_STOP = frozenset({";", "&", "&&", "|", "||", ">", ">>", "&>", "&>>", "<", "(", ")"})


@dataclass
class ServeReading:
    """What a vLLM command line says about the plan, and everything else it says."""

    model: str | None = None
    catalogue: str | None = None
    layout: dict[str, Any] = field(default_factory=dict)
    engine: dict[str, Any] = field(default_factory=dict)
    other_flags: list[dict[str, Any]] = field(default_factory=list)
    unknown_flags: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Each document field the command filled → the flag (or --config YAML key) as it was written,
    #: so that an error of the field names what the user wrote (`validate_plan`).
    written: dict[str, str] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        """The plan-document sections the command fills (model only when it names one we know)."""
        doc: dict[str, Any] = {}
        if self.catalogue is not None:  # the name served stays the one the command gives
            doc["model"] = {"catalogue": self.catalogue, "name": self.model}
        if self.layout:
            doc["layout"] = dict(self.layout)
        if self.engine:
            doc["engine"] = dict(self.engine)
        return doc

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "catalogue": self.catalogue, "document": self.document(),
                "other_flags": self.other_flags, "unknown_flags": self.unknown_flags, "notes": self.notes}


def split_command(command: str) -> list[str]:
    """Shell words of one command (continuations joined, comments dropped, up to an operator)."""
    text = re.sub(r"\\\r?\n", " ", command)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError as exc:  # "No closing quotation"
        raise InputError("serve", f"the command line does not split into words ({exc}); {EXPECTED}") from None
    out: list[str] = []
    for word in words:
        if word in _STOP:
            if any(w for w in out if not _ASSIGNMENT.match(w)):
                break
            out = []
            continue
        out.append(word)
    return out


def _vllm_args(words: list[str]) -> list[str] | None:
    """The arguments after vLLM's program name in `words`, or None when `words` is not vLLM's."""
    for i, word in enumerate(words):
        base = word.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(words) and words[i + 1] == "serve":
            return words[i + 2:]
        if word == "-m" and i + 1 < len(words) and _ENTRYPOINT.match(words[i + 1]):
            return words[i + 2:]
        if "vllm-openai" in word or base.startswith("vllm-openai"):  # docker run … vllm/vllm-openai:TAG args
            return words[i + 1:]
    return None


def command_args(command: str | Sequence[str], where: str = "serve") -> list[str]:
    """vLLM's arguments from a command string or list (a Kubernetes `command` + `args`, or `args`)."""
    return _command(command, where)[1]


def _command(command: str | Sequence[str], where: str) -> tuple[list[str], list[str]]:
    """The command's leading `VAR=value` assignments, and vLLM's arguments."""
    if isinstance(command, str):
        words = [w for w in split_command(command)]
    elif all(isinstance(w, str) for w in command):
        words = [w for part in command for w in ([part] if not part.startswith("vllm serve") else part.split())]
    else:
        raise InputError(where, f"a list of strings, got {command!r:.80}; {EXPECTED}")
    assignments: list[str] = []
    while words and _ASSIGNMENT.match(words[0]):
        assignments.append(words.pop(0))
    args = _vllm_args(words)
    if args is not None:
        return assignments, args
    if words and words[0].startswith("-"):
        return assignments, words  # an args list on its own (a Kubernetes args: under the vllm image)
    shown = " ".join(words[:3]) or "(empty)"
    raise InputError(where, f"{shown!r} is not a vLLM command; {EXPECTED}")


def _normal(flag: str) -> str:
    """`--max_model_len` → `--max-model-len` (FlexibleArgumentParser: only the part before a dot)."""
    if not flag.startswith("--"):
        return flag
    head, dot, tail = flag[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + tail


def _split_tokens(args: list[str]) -> list[tuple[str | None, str | None, str]]:
    """(flag, value, flag as written) in order; a positional is (None, value, ""); a bare flag
    (flag, None, written)."""
    table = vllm_flag_table()
    out: list[tuple[str | None, str | None, str]] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word == "-" or re.fullmatch(r"-\d.*", word):
            out.append((None, word, ""))
            continue
        written, eq, value = word.partition("=")
        flag = _normal(written)
        if eq:
            out.append((flag, value, written))
            continue
        spec = table.get(flag.split(".")[0]) or (table.get("--" + flag[5:]) if flag.startswith("--no-") else None)
        takes = spec.arity == "value" if spec is not None else True
        if flag.startswith("--no-") and spec is not None and flag not in table:
            takes = False
        nxt = args[i] if i < len(args) else None
        wants = takes or (spec is not None and spec.arity in ("optional", "list"))
        if wants and nxt is not None and _is_value(nxt):
            end = i + 1
            while spec is not None and spec.arity == "list" and end < len(args) and _is_value(args[end]):
                end += 1  # nargs="+": every word up to the next flag (argparse's greedy match)
            out.append((flag, " ".join(args[i:end]), written))
            i = end
            continue
        out.append((flag, None, written))
    return out


def _is_value(word: str) -> bool:
    """A word argparse takes as a value, not a flag (a negative number is a value)."""
    return not word.startswith("-") or re.fullmatch(r"-\d.*", word) is not None


def read_serve(command: str | Sequence[str], where: str = "serve") -> ServeReading:
    """Read a vLLM command line (see the module docstring); InputError when it is not vLLM's."""
    assignments, args = _command(command, where)
    reading = read_args(args, where)
    _environment(reading, assignments, where)
    return reading


#: The engine environment variables the plan sizes with (vllm/envs.py @28be48fa9, each read as
#: `bool(int(value))`) → their `engine` field: `plan_query.KNOBS`' `env` (a test asserts they agree).
ENGINE_ENV: dict[str, str] = {
    "VLLM_MLA_DISABLE": "mla_disable",
    "VLLM_USE_FLASHINFER_SAMPLER": "flashinfer_sampler",
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "estimate_cudagraphs",
    # read as `value.strip().lower() in ("1", "true")`, anything else false (vllm/envs.py @28be48fa9)
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "allow_long_max_model_len",
}
#: Variables vLLM reads as a word, not `bool(int(value))`.
_TRUE_WORDS: dict[str, tuple[str, ...]] = {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": ("1", "true")}


def _environment(reading: ServeReading, assignments: list[str], where: str) -> None:
    """The command's `VLLM_MLA_DISABLE=1 vllm serve …` prefix: the engine variables the plan sizes
    with fill the engine (they were dropped, and a DeepSeek command with VLLM_MLA_DISABLE=1 was
    planned with its latent cache); the others are named in a note."""
    others: list[str] = []
    for word in assignments:
        name, _, value = word.partition("=")
        key = ENGINE_ENV.get(name)
        if key is None:
            others.append(name)
            continue
        words = _TRUE_WORDS.get(name)
        try:
            reading.engine[key] = value.strip().lower() in words if words else bool(int(value))
        except ValueError:
            why = f"expected 0 or 1 (vLLM reads bool(int(value))), got {value!r}"
            raise InputError(f"{where} {name}", why) from None
        reading.written[f"engine.{key}"] = name
    if others:
        reading.notes.append("environment variables the plan does not model (the engine runs with them, the "
                             f"plan's exports do not write them): {', '.join(others)}")


def read_args(args: list[str], where: str = "serve") -> ServeReading:
    reading = ServeReading()
    table = vllm_flag_table()
    for flag, value, written in _split_tokens(args):
        if flag is None:
            if reading.model is None:
                reading.model = value
            else:
                reading.unknown_flags.append({"flag": None, "value": value, "why": "a second positional argument"})
            continue
        if flag == MODEL_FLAG:
            reading.model = value
            continue
        spec = table.get(flag.split(".")[0])
        negated = spec is None and flag.startswith("--no-") and ("--" + flag[5:]) in table
        canonical = (table["--" + flag[5:]] if negated else spec)
        if canonical is None:
            reading.unknown_flags.append({"flag": flag, "value": value, "why": "not a flag of vllm serve"})
            continue
        plan_flag = BY_FLAG.get(canonical.name)
        if plan_flag is None or "." in flag:
            reading.other_flags.append({"flag": flag, "value": value, "vllm_flag": canonical.name,
                                        "removed_from_vllm": canonical.removed})
            continue
        if _take(reading, plan_flag, "false" if negated else value, flag, where):
            # a --config YAML's key is written without the dashes config_args put before it
            reading.written[f"{plan_flag.section}.{plan_flag.key}"] = (
                written.removeprefix("--") if where == "vllm_config" else written)
    _offload(reading, where)
    read_lora(reading, where)
    read_speculative(reading, where)
    _match_model(reading)
    return reading


def _offload(reading: ServeReading, where: str) -> None:
    """`--kv-offloading-size` (GiB, vLLM's float) and `--kv-offloading-backend` → `engine.kv_offload`."""
    given = {f["vllm_flag"]: f for f in reading.other_flags if f.get("vllm_flag") in OFFLOAD_FLAGS}
    if not given:
        return
    reading.other_flags = [f for f in reading.other_flags if f.get("vllm_flag") not in OFFLOAD_FLAGS]
    size = given.get("--kv-offloading-size")
    if size is None:
        reading.notes.append("--kv-offloading-backend without --kv-offloading-size: vLLM turns no offloading on")
        return
    try:
        gib = float(str(size["value"]))
    except ValueError:
        raise InputError(f"{where} --kv-offloading-size", f"expected a size in GiB, got {size['value']!r}") from None
    backend = given.get("--kv-offloading-backend")
    reading.engine["kv_offload"] = {"backend": str(backend["value"]) if backend else "native",
                                    "cpu_bytes": int(gib * 2**30)}


def _take(reading: ServeReading, spec: PlanFlag, value: str | None, given: str, where: str) -> bool:
    """Put a plan flag's value in the reading; whether it filled the document field."""
    try:
        parsed = plan_value(spec, value)
    except ServeValueError as exc:
        if exc.keep:
            reading.other_flags.append({"flag": given, "value": value, "vllm_flag": spec.flag,
                                        "removed_from_vllm": False})
            reading.notes.append(f"{given} {value}: {exc}")
            return False
        raise InputError(f"{where} {given}", str(exc)) from None
    if parsed is None and spec.key == "max_model_len":  # human_readable_int_or_auto: vLLM auto-fits it
        reading.engine["max_model_len_auto"] = True
        reading.written["engine.max_model_len_auto"] = given
        return False
    if parsed is None:
        reading.notes.append(f"{given} {value}: left to vLLM's default (the plan derives it)")
        return False
    (reading.layout if spec.section == "layout" else reading.engine)[spec.key] = parsed
    return True


def _match_model(reading: ServeReading) -> None:
    if reading.model is None:
        reading.notes.append("the command names no model (give one: `vllm serve MODEL`)")
        return
    slug, note = model_match(reading.model)
    reading.catalogue = slug
    if note:
        reading.notes.append(note)


def read_vllm_config(text: str, where: str = "vllm_config") -> ServeReading:
    """A vLLM `--config` YAML file (flag names as keys); InputError when it is not one."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise InputError(where, f"the YAML does not parse{at}; expected vLLM's --config file: "
                                "a mapping of flag names to values (e.g. `tensor-parallel-size: 4`)") from None
    if not isinstance(data, dict):
        raise InputError(where, f"expected vLLM's --config file: a YAML mapping of flag names to values, "
                                f"got {type(data).__name__}")
    return read_args(config_args(data), where)


def config_args(data: dict[Any, Any]) -> list[str]:
    """vLLM's `FlexibleArgumentParser.load_config_file` (vllm/utils/argparse_utils.py): `key: true`
    → `--key`, `key: false` → nothing, lists → `--key a b`, mappings → `--key JSON`."""
    import json

    args: list[str] = []
    for key, value in data.items():
        flag = "--" + str(key)
        if isinstance(value, bool):
            if value:
                args.append(flag)
        elif isinstance(value, list):
            if value:
                args.extend([flag, *(str(v) for v in value)])
        elif isinstance(value, dict):
            args.extend([flag, json.dumps(value)])
        else:
            args.extend([flag, str(value)])
    return args


def reading_of_document(doc: Mapping[str, Any]) -> ServeReading | None:
    """The reading of a plan document's `serve` (command string or list) or `vllm_config` (YAML text)."""
    serve, config = doc.get("serve"), doc.get("vllm_config")
    if serve is not None and config is not None:
        raise InputError("serve", "give serve (a command line) or vllm_config (its --config YAML), not both")
    if serve is not None:
        if not isinstance(serve, str | list) or (isinstance(serve, str) and len(serve) > MAX_COMMAND_CHARS):
            raise InputError("serve", f"a command line (string, at most {MAX_COMMAND_CHARS:,} characters) or a "
                                      "list of arguments")
        return read_serve(serve, "serve")
    if config is not None:
        if not isinstance(config, str) or len(config) > MAX_COMMAND_CHARS:
            raise InputError("vllm_config", f"the text of a vLLM --config YAML file (at most {MAX_COMMAND_CHARS:,} "
                                            "characters)")
        return read_vllm_config(config, "vllm_config")
    return None


def fill_from_serve(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The plan document with `serve`/`vllm_config` filling model, layout and engine; fields the
    document states itself win. InputError when the command names no model the plan can size."""
    return filled_from_serve(doc)[0]


def filled_from_serve(doc: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """`fill_from_serve`, and each field it filled from the command → the flag as written there
    ("engine.gpu_memory_utilization" → "serve --gpu-memory-utilization"), for its errors."""
    reading = reading_of_document(doc)
    out = dict(doc)
    if reading is None:
        return out, {}
    where = "serve" if doc.get("serve") is not None else "vllm_config"
    written = {path: f"{where} {name}" for path, name in reading.written.items()
               if not _states(doc, path)}  # a field the document states itself is the document's
    filled = reading.document()
    for section in ("layout", "engine"):
        given = doc.get(section)
        if section in filled or given is not None:
            out[section] = {**filled.get(section, {}), **(given if isinstance(given, Mapping) else {})}
    if doc.get("model") is None and "model" in filled:
        out["model"] = filled["model"]
    if out.get("model") is None and doc.get("from_log") is None:
        field_name = "serve" if doc.get("serve") is not None else "vllm_config"
        why = next((n for n in reading.notes if "model" in n), "the command names no model")
        raise InputError(field_name, why)
    return out, written


def _states(doc: Mapping[str, Any], path: str) -> bool:
    node: object = doc  # "engine.lora.max_loras" walks into the document's own engine.lora
    for part in path.split("."):
        if not isinstance(node, Mapping):
            return False
        node = node.get(part)
    return node is not None


def serve_notes(doc: Mapping[str, Any]) -> list[str]:
    """What the plan did not take from the document's command line, in words (for the plan's notes)."""
    reading = reading_of_document(doc)
    if reading is None:
        return []
    notes = list(reading.notes)
    if reading.other_flags:
        shown = ", ".join(f["flag"] for f in reading.other_flags[:12])
        more = f" and {len(reading.other_flags) - 12} more" if len(reading.other_flags) > 12 else ""
        # the exports write only the flags the plan computes (app.core.exports), so these are not in them
        notes.append(f"vLLM flags the plan does not model (not in its flags or exports: add them to the command "
                     f"you deploy): {shown}{more}")
    if reading.unknown_flags:
        shown = ", ".join(str(f["flag"] or f["value"]) for f in reading.unknown_flags[:12])
        notes.append(f"not flags of vllm serve (check the spelling): {shown}")
    return notes
