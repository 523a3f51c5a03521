"""The validator's bounds, in our words: one place for every bounded field of a document model.

Pydantic states a bound error in its own words and with the violated side only ("Input should be
less than or equal to 1"). `bound_message` turns any such error (`greater_than[_equal]`,
`less_than[_equal]`, `too_short`/`too_long`, `string_too_short`/`string_too_long`) into what is
wrong, where and the field's whole stated range ("gpu_memory_utilization 1.7 is out of range: give
a fraction in (0, 1]"), reading both sides from the field's own metadata (`Field(gt=…, le=…)`), so
a new bounded field needs no message of its own. `bounded_fields` lists every such field of a
model (its tests assert the message over all of them; the plan form reads a knob's range here).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

#: Pydantic's error types of a numeric bound and of a length bound.
NUMBER_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
LENGTH_BOUND_ERRORS = frozenset({"too_short", "too_long", "string_too_short", "string_too_long"})


@dataclass(frozen=True)
class Limits:
    """A field's bounds as the validator states them (None: unbounded on that side)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False  # gt rather than ge
    hi_open: bool = False  # lt rather than le
    whole: bool = False  # an integer field
    min_length: int | None = None
    max_length: int | None = None

    @property
    def numeric(self) -> bool:
        return self.lo is not None or self.hi is not None

    @property
    def sized(self) -> bool:
        return self.min_length is not None or self.max_length is not None

    def admits(self, value: float) -> bool:
        above = self.lo is None or (value > self.lo if self.lo_open else value >= self.lo)
        below = self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)
        return above and below

    def range_words(self) -> str:
        """What to give, e.g. "a fraction in (0, 1]", "a whole number from 1 to 4,096"."""
        if self.whole:
            lo = None if self.lo is None else int(self.lo) + (1 if self.lo_open else 0)
            hi = None if self.hi is None else int(self.hi) - (1 if self.hi_open else 0)
            if lo is not None and hi is not None:
                return f"a whole number from {lo:,} to {hi:,}"
            return f"a whole number of at least {lo:,}" if lo is not None else f"a whole number of at most {hi:,}"
        if self.lo is not None and self.hi is not None:
            kind = "a fraction" if (self.lo, self.hi) == (0, 1) else "a number"
            return (f"{kind} in {'(' if self.lo_open else '['}{_number(self.lo)}, "
                    f"{_number(self.hi)}{')' if self.hi_open else ']'}")
        if self.lo is not None:
            return f"a number {'above' if self.lo_open else 'of at least'} {_number(self.lo)}"
        assert self.hi is not None
        return f"a number {'below' if self.hi_open else 'of at most'} {_number(self.hi)}"

    def length_words(self, unit: str) -> str:
        """How long it may be, e.g. "1 to 64 characters", "at most 131,072 items"."""
        lo, hi = self.min_length, self.max_length
        if lo is not None and hi is not None:
            return f"{lo:,} to {hi:,} {unit}"
        return f"at least {lo:,} {unit}" if lo is not None else f"at most {hi:,} {unit}"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else repr(float(value))


def limits_of(metadata: Iterable[object], whole: bool = False) -> Limits:
    """The bounds of a field's metadata (annotated_types' Ge/Gt/Le/Lt, MinLen/MaxLen, or a FieldInfo)."""
    limits = Limits(whole=whole)
    for item in metadata:
        if isinstance(item, FieldInfo):
            limits = limits_of([limits, *item.metadata], whole)
        elif isinstance(item, Limits):
            limits = item
        elif isinstance(item, annotated_types.Ge):
            limits = replace(limits, lo=float(item.ge), lo_open=False)  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.Gt):
            limits = replace(limits, lo=float(item.gt), lo_open=True)  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.Le):
            limits = replace(limits, hi=float(item.le), hi_open=False)  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.Lt):
            limits = replace(limits, hi=float(item.lt), hi_open=True)  # type: ignore[arg-type]
        elif isinstance(item, annotated_types.MinLen):
            limits = replace(limits, min_length=item.min_length)
        elif isinstance(item, annotated_types.MaxLen):
            limits = replace(limits, max_length=item.max_length)
    return limits


def _unwrap(annotation: object) -> tuple[object, list[object]]:
    """`Annotated[X, …]` and `X | None` peeled: X and the metadata met on the way."""
    metadata: list[object] = []
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation, *extra = typing.get_args(annotation)
            metadata.extend(extra)
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation, metadata
            annotation = args[0]
        else:
            return annotation, metadata


def _model_field(model: type[BaseModel], name: str) -> FieldInfo | None:
    """A model's field by its name or by one of its validation aliases (the name a document used)."""
    if name in model.model_fields:
        return model.model_fields[name]
    for info in model.model_fields.values():
        alias = info.validation_alias
        choices = getattr(alias, "choices", None)
        if alias == name or (isinstance(choices, list) and name in choices):
            return info
    return None


def _step(annotation: object, part: int | str) -> object | None:
    """The annotation one error-location part below `annotation` (None: not one we can follow)."""
    inner, _ = _unwrap(annotation)
    if isinstance(inner, type) and issubclass(inner, BaseModel) and isinstance(part, str):
        info = _model_field(inner, part)
        return None if info is None else Annotated[info.annotation, info]  # keeps the field's own bounds
    origin = typing.get_origin(inner)
    args: tuple[object, ...] = typing.get_args(inner)
    if origin is list and isinstance(part, int) and args:
        return args[0]
    if origin is tuple and isinstance(part, int) and part < len(args):
        return args[part]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def limits_at(model: type[BaseModel], loc: Sequence[int | str]) -> Limits | None:
    """The bounds of the field at an error location (None: the location leaves the models)."""
    annotation: object = model
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return None
    inner, metadata = _unwrap(annotation)
    return limits_of(metadata, inner is int)


Loc = tuple[int | str, ...]


def bounded_fields(model: type[BaseModel], prefix: Loc = ()) -> Iterator[tuple[Loc, Limits]]:
    """Every bounded field under a model, by location (list and tuple items at index 0, …)."""
    for name, info in model.model_fields.items():
        yield from _bounded((*prefix, name), Annotated[info.annotation, info])


def _bounded(loc: Loc, annotation: object) -> Iterator[tuple[Loc, Limits]]:
    inner, metadata = _unwrap(annotation)
    limits = limits_of(metadata, inner is int)
    if limits.numeric or limits.sized:
        yield loc, limits
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        yield from bounded_fields(inner, loc)
        return
    origin, args = typing.get_origin(inner), typing.get_args(inner)
    if origin is list and args:
        yield from _bounded((*loc, 0), args[0])
    elif origin is tuple:
        for i, arg in enumerate(args):
            yield from _bounded((*loc, i), arg)
    elif origin in (Union, types.UnionType):
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                yield from bounded_fields(arg, loc)


def subject(loc: Sequence[int | str]) -> str:
    """The name a message gives the field: from its last named part on ("activation_points[0][0]")."""
    named = max((i for i, p in enumerate(loc) if isinstance(p, str)), default=0)
    out = ""
    for part in loc[named:]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _shown(value: object) -> str:
    """The value as the message echoes it: a number as given (a huge one by its size, never its digits)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return repr(value)[:60]
    text = str(value)
    return text if len(text) <= 24 else f"(a {len(text.lstrip('-')):,}-digit number)"


def bound_message(model: type[BaseModel] | None, error: Mapping[str, Any], loc: Sequence[int | str]) -> str | None:
    """A pydantic bound error in our words, naming the field and its whole stated range (None: not
    a bound error). `loc` is the error's location in `model` without pydantic's validator tags;
    without a model (a request's query parameter) the violated side is the range stated."""
    kind = error["type"]
    if kind not in NUMBER_BOUND_ERRORS and kind not in LENGTH_BOUND_ERRORS:
        return None
    stated = limits_at(model, loc) if model is not None else None
    fallback = _from_context(error.get("ctx") or {})
    name, value = subject(loc), error.get("input")
    if kind in NUMBER_BOUND_ERRORS:
        limits = stated if stated is not None and stated.numeric else fallback
        return f"{name} {_shown(value)} is out of range: give {limits.range_words()}"
    limits = stated if stated is not None and stated.sized else fallback
    text = kind.startswith("string")
    unit = "characters" if text else "items"
    size = len(value) if isinstance(value, str | list | tuple | dict) else None
    what = "too short" if kind.endswith("short") else "too long"
    got = f" ({size:,} {unit})" if size is not None else ""
    return f"{name} is {what}{got}: give {limits.length_words(unit)}"


def _from_context(ctx: Mapping[str, Any]) -> Limits:
    """The violated side alone, from pydantic's error context (a location we could not follow)."""
    if "gt" in ctx:
        return Limits(lo=float(ctx["gt"]), lo_open=True)
    if "ge" in ctx:
        return Limits(lo=float(ctx["ge"]))
    if "lt" in ctx:
        return Limits(hi=float(ctx["lt"]), hi_open=True)
    if "le" in ctx:
        return Limits(hi=float(ctx["le"]))
    if "min_length" in ctx:
        return Limits(min_length=int(ctx["min_length"]))
    return Limits(max_length=int(ctx.get("max_length", 0)))
