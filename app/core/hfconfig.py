"""A Hugging Face config.json seen through its text part: typed look-ups with field-named errors."""

from __future__ import annotations

import math
from collections.abc import Mapping

from app.core.config_defaults import TEXT_CONFIG_TYPE, class_default
from app.core.errors import InputError

#: The largest integer a config.json field may hold (2**40): far above any real vocabulary,
#: position count or width, far below where float arithmetic on it overflows.
MAX_CONFIG_INT = 2**40


class HFConfig:
    """Looks a key up in the text config first, then in the top-level config."""

    def __init__(self, top: Mapping[str, object]) -> None:
        nested = top.get("text_config")
        self.top = top
        self.text: Mapping[str, object] = nested if isinstance(nested, Mapping) else top
        self.nested = self.text is not top
        self._seen: dict[tuple[str, ...], object] = {}  # configs are read-only while parsed
        top_type = str(top.get("model_type") or "")
        text_type = str(self.text.get("model_type") or (TEXT_CONFIG_TYPE.get(top_type, "") if self.nested else ""))
        self._classes = (text_type, top_type) if self.nested else (top_type,)
        self.defaulted: dict[str, tuple[object, str]] = {}  # field → (class default, model_type) used

    def get(self, *keys: str) -> object:
        if keys in self._seen:
            return self._seen[keys]
        found = None
        for source in (self.text, self.top):
            for key in keys:
                value = source.get(key)
                if value is not None:
                    found = value
                    break
            if found is not None:
                break
        if found is None and not any(key in source for source in (self.text, self.top) for key in keys):
            found = self._class_default(keys)
        self._seen[keys] = found
        return found

    def text_get(self, key: str) -> object:
        """A key of the text config alone, as vLLM reads it from ``get_hf_text_config`` (vllm/
        transformers_utils/config.py @28be48fa9): a multimodal config's top-level keys belong to the
        composite config, not to the language model, so they are not looked at; an absent key takes
        the text config class's default."""
        if not self.nested:
            return self.get(key)
        value = self.text.get(key)
        if value is None and key not in self.text:
            value = self._class_default((key,), self._classes[:1])
        return value

    def text_int_or_none(self, key: str) -> int | None:
        """``text_get`` as an integer (the same checks as ``int_or_none``)."""
        return self._as_int(key, self.text_get(key))

    def _class_default(self, keys: tuple[str, ...], classes: tuple[str, ...] | None = None) -> object:
        """The config class's default for an absent field, as transformers (and so vLLM) fills it."""
        for key in keys:
            for model_type in self._classes if classes is None else classes:
                found, value = class_default(model_type, key)
                if found:
                    self.defaulted[key] = (value, model_type)
                    return value
        return None

    def int_or_none(self, *keys: str) -> int | None:
        return self._as_int(keys[0], self.get(*keys))

    @staticmethod
    def _as_int(key: str, value: object) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"model.config.{key}", f"expected an integer, got {str(value)[:40]!r}")
        if isinstance(value, float) and (not math.isfinite(value) or int(value) != value):
            raise InputError(f"model.config.{key}", f"expected an integer, got {value!r}")
        if value < 0:
            raise InputError(f"model.config.{key}", "must not be negative")
        if value > MAX_CONFIG_INT:
            # The stated range (README "Reliability"): no real config field comes near 2**40.
            raise InputError(f"model.config.{key}", f"must be at most {MAX_CONFIG_INT:,} (2**40)")
        return int(value)

    def int_req(self, *keys: str) -> int:
        value = self.int_or_none(*keys)
        if value is None or value <= 0:
            raise InputError(f"model.config.{keys[0]}", f"a positive integer is required (got {value!r})")
        return value

    def model_type(self) -> str:
        value = self.text.get("model_type") or self.top.get("model_type")
        return str(value) if value is not None else ""
