"""Regenerate app/data/vllm_flags.json: every `vllm serve` flag name, alias and arity.

Reads vLLM's source from a git mirror (no vLLM install needed):
- vllm/engine/arg_utils.py: `EngineArgs.add_cli_args` / `AsyncEngineArgs.add_cli_args`, each
  `add_argument("--name", "-alias", **kwargs["field"])`; a field annotated `bool` becomes
  argparse.BooleanOptionalAction (`--x` / `--no-x`, no value), `bool | str | None` an optional
  value, a `list` / `set` / `tuple` one or more words (`collection_to_kwargs`: nargs="+",
  `--lora-target-modules q_proj v_proj`), each read from the EngineArgs field the flag sets
  (see `_compute_kwargs` in the same file);
- vllm/entrypoints/openai/cli_args.py: `make_arg_parser` (model_tag, --headless, --config, …) and
  the `FrontendArgs`/`BaseFrontendArgs` dataclass fields, each `--field-name` (a list field one
  word when `_customize_cli_kwargs` deletes its nargs: --allowed-origins is one JSON text).

Older commits after the first add the flags vLLM has since removed (marked `"removed": true`),
so a command line from an older release is still read as vLLM's.

Usage: python scripts/extract_vllm_flags.py MIRROR_GIT_DIR NEWEST_COMMIT [OLDER_COMMIT…] > app/data/vllm_flags.json
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any


def _source(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _fields(tree: ast.Module, classes: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out[item.target.id] = ast.unparse(item.annotation)
    return out


_COLLECTIONS = ("list[", "set[", "tuple[")


def _arity(annotation: str, call: ast.Call, one_word: bool = False) -> str:
    for kw in call.keywords:
        if kw.arg == "action":
            text = ast.unparse(kw.value)
            if "store_true" in text or "store_false" in text or "BooleanOptional" in text:
                return "bool"
        if kw.arg == "nargs" and ast.unparse(kw.value) in ("'?'",):
            return "optional"
        if kw.arg == "nargs" and ast.unparse(kw.value) in ("'+'", "'*'"):
            return "list"
    parts = {p.strip() for p in annotation.replace("Optional[", "").split("|")}
    if {p.rstrip("]") for p in parts} & {"bool"}:
        return "optional" if {p.rstrip("]") for p in parts} & {"str"} else "bool"
    if not one_word and any(p.startswith(_COLLECTIONS) for p in parts):
        return "list"  # collection_to_kwargs: nargs "+"
    return "value"


def _add_argument_calls(tree: ast.Module, fields: dict[str, str]) -> dict[str, Any]:
    flags: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        longs = [n for n in names if n.startswith("--")]
        if not longs:
            continue
        field = longs[0][2:].replace("-", "_")
        for kw in node.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Subscript):
                key = kw.value.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    field = key.value
        dest = longs[0][2:].replace("-", "_")  # the EngineArgs field argparse sets (lora_target_modules)
        flags[longs[0]] = {"aliases": [n for n in names if n != longs[0]], "field": field,
                           "arity": _arity(fields.get(dest) or fields.get(field, ""), node)}
    return flags


def _one_word(tree: ast.Module) -> set[str]:
    """The frontend fields whose nargs `_customize_cli_kwargs` deletes (`del frontend_kwargs["x"]["nargs"]`)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Delete):
            for target in node.targets:
                text = ast.unparse(target)
                if text.endswith("['nargs']") and isinstance(target, ast.Subscript) \
                        and isinstance(target.value, ast.Subscript) and isinstance(target.value.slice, ast.Constant):
                    out.add(str(target.value.slice.value))
    return out


def _flags_at(git_dir: str, commit: str) -> dict[str, Any]:
    engine = ast.parse(_source(git_dir, commit, "vllm/engine/arg_utils.py"))
    cli = ast.parse(_source(git_dir, commit, "vllm/entrypoints/openai/cli_args.py"))
    flags = _add_argument_calls(engine, _fields(engine, {"EngineArgs", "AsyncEngineArgs"}))
    flags.update(_add_argument_calls(cli, {}))
    one_word = _one_word(cli)
    for name, annotation in _fields(cli, {"BaseFrontendArgs", "FrontendArgs"}).items():
        flag = "--" + name.replace("_", "-")
        flags.setdefault(flag, {"aliases": [], "field": name, "arity": _arity(annotation, ast.Call(
            func=ast.Name("x"), args=[], keywords=[]), name in one_word)})
    return flags


def main() -> None:
    git_dir, commits = sys.argv[1], sys.argv[2:]
    flags = _flags_at(git_dir, commits[0])
    for older in commits[1:]:
        for name, spec in _flags_at(git_dir, older).items():
            if name not in flags:
                flags[name] = {**spec, "removed": True}
    doc = {"source": "vllm-project/vllm", "commits": commits,
           "files": ["vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py"],
           "flags": dict(sorted(flags.items()))}
    json.dump(doc, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
