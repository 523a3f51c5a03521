"""A Hugging Face config.json seen through its text part: typed look-ups with field-named errors."""

from __future__ import annotations

from collections.abc import Mapping

from app.core.errors import InputError


class HFConfig:
    """Looks a key up in the text config first, then in the top-level config."""

    def __init__(self, top: Mapping[str, object]) -> None:
        nested = top.get("text_config")
        self.top = top
        self.text: Mapping[str, object] = nested if isinstance(nested, Mapping) else top
        self.nested = self.text is not top
        self._seen: dict[tuple[str, ...], object] = {}  # configs are read-only while parsed

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
        self._seen[keys] = found
        return found

    def int_or_none(self, *keys: str) -> int | None:
        value = self.get(*keys)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
            raise InputError(f"model.config.{keys[0]}", f"expected an integer, got {value!r}")
        if value < 0:
            raise InputError(f"model.config.{keys[0]}", f"must not be negative, got {value!r}")
        return int(value)

    def int_req(self, *keys: str) -> int:
        value = self.int_or_none(*keys)
        if value is None or value <= 0:
            raise InputError(f"model.config.{keys[0]}", f"a positive integer is required (got {value!r})")
        return value

    def model_type(self) -> str:
        value = self.text.get("model_type") or self.top.get("model_type")
        return str(value) if value is not None else ""
