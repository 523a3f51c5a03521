"""Values of `vllm serve` flags as vLLM reads them, and the catalogue match of the model argument."""

from __future__ import annotations

import re

from app.core.vllm_flags import PlanFlag
from app.ingest.catalogue import get_model

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


class ServeValueError(ValueError):
    """A flag value the plan cannot take; `keep` when the flag is valid for vLLM but not planned."""

    def __init__(self, message: str, keep: bool = False) -> None:
        super().__init__(message)
        self.keep = keep


def human_readable_int(text: str) -> int:
    """vLLM's `human_readable_int` (vllm/utils/argparse_utils.py, commit 28be48fa944d): `1k` = 1,000,
    `1K` = 1,024, `25.6k` = 25,600; decimals are refused with binary suffixes."""
    text = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ServeValueError(f"decimals are not allowed with binary suffixes like {suffix} (vLLM refuses it)")
        return int(number) * _BINARY[suffix]
    try:
        return int(text)
    except ValueError:
        raise ServeValueError(f"expected an integer (vLLM also takes 32k or 32K), got {text!r}") from None


def _bool(text: str | None) -> bool:
    if text is None or text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ServeValueError(f"expected no value, true or false, got {text!r}")


def plan_value(spec: PlanFlag, text: str | None) -> object:
    """The plan-document value of a flag; None when vLLM is left to derive it (`auto`, -1)."""
    if spec.kind == "bool":
        return _bool(text)
    if text is None:
        raise ServeValueError("needs a value")
    if spec.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ServeValueError(f"expected a number, got {text!r}") from None
    if spec.kind == "str":
        if spec.key == "quantization" and text not in ("fp8", "awq", "gptq"):
            # The checkpoint's own quantization comes from its config.json; the plan's --quantization is
            # vLLM's online fp8 (Fp8Config) on an unquantized checkpoint, or awq / gptq forcing the checkpoint's
            # plain kernels (app.core.dequant_linear).
            raise ServeValueError("the plan reads a checkpoint's quantization from its config.json; kept as given",
                                  keep=True)
        return text
    if spec.kind == "tokens" and text.strip().lower() in ("auto", "-1"):
        return None  # human_readable_int_or_auto: -1 / auto = derive from the model
    return human_readable_int(text)


_VARIANT = re.compile(r"(-instruct|-chat|-hf|-base)$", re.IGNORECASE)


def _candidates(model: str) -> list[str]:
    """The model argument, the Hugging Face id inside a cache path, the last path component."""
    out = [model]
    cache_dir = re.search(r"models--([^/]+)--([^/]+)", model)
    if cache_dir:
        out.append(f"{cache_dir.group(1)}/{cache_dir.group(2)}")
    tail = model.rstrip("/").rsplit("/", 1)[-1]
    out.append(tail)
    return out


def _variant_key(name: str) -> str:
    tail = name.rsplit("/", 1)[-1].casefold().removeprefix("meta-")
    return _VARIANT.sub("", tail)


def model_match(model: str) -> tuple[str | None, str | None]:
    """(catalogue slug, note) for a `vllm serve` model argument, matched by Hugging Face id."""
    from app.ingest.catalogue import list_models

    for key in _candidates(model):
        try:
            entry = get_model(key)
        except KeyError:
            continue
        return entry.slug, None if key == model else f"model {model!r} matched the catalogue's {entry.hf_id}"
    wanted = _variant_key(model)
    for entry in list_models():
        if _variant_key(entry.hf_id) == wanted:
            return entry.slug, (f"model {model!r} matched the catalogue's {entry.hf_id} (an instruct/base variant "
                                "of the same architecture; give --max-model-len if their context lengths differ)")
    return None, (f"model {model!r} is not in the catalogue: add model.config (its config.json) "
                  "or model.kv_bytes_per_token to the plan")
