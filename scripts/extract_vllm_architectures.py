"""Regenerate app/data/vllm_architectures.json: every architecture name vLLM's model registry knows.

Reads vLLM's source from a git mirror (no vLLM install needed):
- vllm/model_executor/models/registry.py: the module-level dicts `_TEXT_GENERATION_MODELS`,
  `_EMBEDDING_MODELS`, …, `_TRANSFORMERS_BACKEND_MODELS` (whose union is `_VLLM_MODELS`, the
  names `ModelRegistry.inspect_model_cls` accepts), `_PREVIOUSLY_SUPPORTED_MODELS` (name → the
  last release that had it) and `_OOT_SUPPORTED_MODELS` (name → the out-of-tree plugin);
- vllm/config/model.py: `_SUFFIX_TO_DEFAULTS`, the suffixes `_normalize_arch` swaps to find a
  registered base architecture (e.g. `Qwen3ForSequenceClassification` → `Qwen3ForCausalLM`).

Usage: python scripts/extract_vllm_architectures.py MIRROR_GIT_DIR COMMIT > app/data/vllm_architectures.json
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any

REGISTRY = "vllm/model_executor/models/registry.py"
MODEL_CONFIG = "vllm/config/model.py"


def _source(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def _module_dicts(tree: ast.Module) -> dict[str, ast.Dict]:
    out: dict[str, ast.Dict] = {}
    for node in tree.body:
        target = (
            node.targets[0]
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else (node.target if isinstance(node, ast.AnnAssign) else None)
        )
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(target, ast.Name) and isinstance(value, ast.Dict):
            out[target.id] = value
    return out


def _keys(d: ast.Dict) -> list[str]:
    return [k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]


def _str_values(d: ast.Dict) -> dict[str, str]:
    return {
        str(k.value): str(v.value)
        for k, v in zip(d.keys, d.values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)
    }


def _union_members(d: ast.Dict) -> list[str]:
    """The dict names a `{**_A, **_B}` literal spreads (keys None in the AST)."""
    return [v.id for k, v in zip(d.keys, d.values, strict=True) if k is None and isinstance(v, ast.Name)]


def _suffixes(model_config_source: str) -> list[str]:
    tree = ast.parse(model_config_source)
    for node in tree.body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "_SUFFIX_TO_DEFAULTS"
            and isinstance(node.value, ast.List)
        ):
            return [
                str(e.elts[0].value)
                for e in node.value.elts
                if isinstance(e, ast.Tuple) and isinstance(e.elts[0], ast.Constant)
            ]
    raise SystemExit(f"_SUFFIX_TO_DEFAULTS not found in {MODEL_CONFIG}")


def extract(git_dir: str, commit: str) -> dict[str, Any]:
    dicts = _module_dicts(ast.parse(_source(git_dir, commit, REGISTRY)))
    members = _union_members(dicts["_VLLM_MODELS"])
    groups = {name.strip("_").lower().removesuffix("_models"): sorted(_keys(dicts[name])) for name in members}
    date = subprocess.run(
        ["git", "-C", git_dir, "log", "-1", "--format=%cs", commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    return {
        "source": "vllm-project/vllm",
        "commit": commit,
        "commit_date": date,
        "files": [REGISTRY, MODEL_CONFIG],
        "groups": groups,
        "previously_supported": _str_values(dicts["_PREVIOUSLY_SUPPORTED_MODELS"]),
        "out_of_tree": _str_values(dicts["_OOT_SUPPORTED_MODELS"]),
        "suffixes": _suffixes(_source(git_dir, commit, MODEL_CONFIG)),
    }


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit(__doc__)
    json.dump(extract(argv[1], argv[2]), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
