"""Whether vLLM can load a config.json's architecture, by vLLM's own model registry.

The names are app/data/vllm_architectures.json, extracted by scripts/extract_vllm_architectures.py
from vllm/model_executor/models/registry.py (`_VLLM_MODELS`, `_PREVIOUSLY_SUPPORTED_MODELS`,
`_OOT_SUPPORTED_MODELS`) and vllm/config/model.py (`_SUFFIX_TO_DEFAULTS`) at the commit the file
names. The rule is `ModelRegistry.inspect_model_cls` / `_raise_for_unsupported` of that file:

- an architecture in the registry loads; so does one whose task suffix swaps to a registered one
  (`_normalize_arch`: `Qwen3ForSequenceClassification` → `Qwen3ForCausalLM`);
- one that vLLM removed raises "was supported in vLLM until vX" (so a plan for a release up to X is fine);
- one moved out of tree raises "install the plugin at …";
- any other goes to the Transformers backend (`_try_resolve_transformers`), which needs custom code
  (`auto_map` with an `AutoModel…` entry) or a class of the installed transformers library. With
  `auto_map` the estimate goes on and says so; without, the installed transformers is not knowable
  here, so the plan refuses, naming the field.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files

from app.core.errors import InputError
from app.core.versions import parse_version

FIELD = "model.config.architectures"


@dataclass(frozen=True)
class Registry:
    commit: str
    date: str
    names: frozenset[str]
    previously_supported: Mapping[str, str]
    out_of_tree: Mapping[str, str]
    suffixes: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"vLLM's model registry (registry.py @{self.commit[:10]}, {self.date})"


@functools.cache
def registry() -> Registry:
    data = json.loads(files("app").joinpath("data/vllm_architectures.json").read_text(encoding="utf-8"))
    names = frozenset(n for group in data["groups"].values() for n in group)
    return Registry(
        data["commit"],
        data["commit_date"],
        names,
        data["previously_supported"],
        data["out_of_tree"],
        tuple(data["suffixes"]),
    )


def _registered(arch: str, reg: Registry) -> bool:
    """`_normalize_arch`: the name itself, or the name with its task suffix swapped for another."""
    if arch in reg.names:
        return True
    for suffix in reg.suffixes:  # try_match_architecture_defaults: the first suffix that matches
        if arch.endswith(suffix):
            stem = arch[: -len(suffix)]
            return any(stem + other in reg.names for other in reg.suffixes)
    return False


def architecture_notes(config: Mapping[str, object], vllm_version: str) -> tuple[str, ...]:
    """What vLLM does with the config's `architectures`: () when it loads them; a note when it runs
    them through its Transformers backend (custom code); InputError naming the field otherwise."""
    archs = config.get("architectures")
    if archs is None:
        return (
            "config.json states no architectures: vLLM needs one ('No model architectures are "
            "specified'); the estimate reads model_type",
        )
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) and a for a in archs):
        raise InputError(FIELD, 'expected a non-empty list of architecture names, e.g. ["LlamaForCausalLM"]')
    reg = registry()
    if any(_registered(a, reg) for a in archs):
        return ()
    arch = archs[0]
    if arch in reg.previously_supported:
        last = reg.previously_supported[arch]
        if parse_version(vllm_version) <= parse_version(last):
            return ()
        raise InputError(
            FIELD,
            f"{arch} was supported in vLLM until v{last} and is not any more "
            f"({reg.where}): set vllm_version to {last} or older",
        )
    if arch in reg.out_of_tree:
        raise InputError(
            FIELD,
            f"{arch} is not in vLLM's tree any more: it needs the plugin at {reg.out_of_tree[arch]} ({reg.where})",
        )
    auto_map = config.get("auto_map")
    if isinstance(auto_map, Mapping) and any(str(k).startswith("AutoModel") for k in auto_map):
        return (
            f"{arch} is not in {reg.where}: vLLM runs it through its Transformers backend (the checkpoint's "
            "custom code, auto_map); the estimate assumes a standard decoder of this config's shape",
        )
    near = difflib.get_close_matches(arch, sorted(reg.names), n=3, cutoff=0.6)
    hint = f"; nearest: {', '.join(near)}" if near else ""
    raise InputError(
        FIELD,
        f"{arch!r} is not an architecture vLLM supports ({reg.where}, "
        f"{len(reg.names)} names){hint}. vLLM would try its Transformers backend, which "
        "needs custom code (auto_map) or that class in the installed transformers",
    )
