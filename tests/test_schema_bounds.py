"""Every bounded field of the plan and sizing documents says, in our words, what is wrong, where,
and its whole stated range (app.schema_bounds): pydantic's "Input should be less than or equal to
1" named one side of the range and not the field, and the plan page showed it beside the input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from app.cli import main
from app.core.errors import InputError
from app.schema_bounds import Limits, bounded_fields, subject
from app.schemas import PlanDocument, validate_plan
from app.sizing_schema import SizingDocument, validate_sizing

PYDANTIC_WORDS = ("Input should", "should have", "List should", "String should")
PLAN_BASE: dict[str, Any] = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80GiB"}}
SIZING_BASE: dict[str, Any] = {"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": 4096}}
#: Required siblings of a nested section, so that the bounded field is the only fault.
SKELETON: dict[tuple[str, ...], dict[str, Any]] = {
    ("engine", "kv_offload"): {"cpu_bytes": "1GiB"},
    ("model", "safetensors_index"): {"metadata": {"total_size": 1000}},
    ("engine", "speculative", "model"): {"catalogue": "llama-3.1-8b"},
}
#: A valid item of each bounded list (a list too long needs its items to be valid).
ITEMS: dict[tuple[str, ...], Any] = {
    ("ranks",): {"total": 1024**3},
    ("notes",): "a note",
    ("policy", "activation_points"): [0, 0],
    ("engine", "lora", "target_modules"): "q_proj",
    ("gpus",): "H100 80GB",
}


def _bad_value(loc: tuple[int | str, ...], limits: Limits) -> Any:
    """A value just outside the field's range (above its top where it has one)."""
    if limits.numeric:
        if limits.hi is not None:
            hi = limits.hi if limits.hi_open else limits.hi + (1 if limits.whole else 0.5)
            return int(hi) if limits.whole else hi
        assert limits.lo is not None
        lo = limits.lo if limits.lo_open else limits.lo - (1 if limits.whole else 0.5)
        return int(lo) if limits.whole else lo
    key = tuple(p for p in loc if isinstance(p, str))
    if (key in ITEMS and isinstance(loc[-1], str)) or key[:1] == ("options",):  # a list (not its item)
        if limits.min_length:
            return []  # too short (a list too long would need distinct items: sizing drops repeats)
        assert limits.max_length is not None
        return [ITEMS[key]] * (limits.max_length + 1)
    if limits.max_length is not None:
        if loc == ("serve",):  # a vLLM command (anything else is refused as not one before the bound)
            return "vllm serve meta-llama/Llama-3.1-8B".ljust(limits.max_length + 1)
        return "x" * (limits.max_length + 1)
    return ""


def _document(base: dict[str, Any], loc: tuple[int | str, ...], value: Any) -> dict[str, Any]:
    out: dict[str, Any] = _put(json.loads(json.dumps(base)), loc, value, ())
    return out


def _put(node: Any, loc: tuple[int | str, ...], value: Any, prefix: tuple[str, ...]) -> Any:
    """`node` with `value` at `loc` (sections made with their required siblings, list items valid)."""
    if not loc:
        return value
    part, rest = loc[0], loc[1:]
    if isinstance(part, int):
        items = list(node) if isinstance(node, list) else []
        while len(items) <= part:
            items.append(json.loads(json.dumps(ITEMS.get(prefix))))
        items[part] = _put(items[part], rest, value, prefix)
        return items
    section = dict(node) if isinstance(node, dict) else {}
    here = (*prefix, part)
    child = section.get(part, json.loads(json.dumps(SKELETON.get(here))) if here in SKELETON else None)
    section[part] = _put(child, rest, value, here)
    return section


def _numbers(limits: Limits) -> list[str]:
    """The range's numbers as a message must show them (an integer's open side as its first value)."""
    out = []
    for bound, is_open, step in ((limits.lo, limits.lo_open, 1), (limits.hi, limits.hi_open, -1)):
        if bound is None:
            continue
        value = bound + step if (limits.whole and is_open) else bound
        out.append(f"{int(value):,}" if float(value).is_integer() else repr(value))
    if limits.min_length is not None:
        out.append(f"{limits.min_length:,}")
    if limits.max_length is not None:
        out.append(f"{limits.max_length:,}")
    return out


def _cases(model: type[BaseModel]) -> list[tuple[tuple[int | str, ...], Limits]]:
    return list(bounded_fields(model))


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _check(error: InputError, loc: tuple[int | str, ...], limits: Limits, value: Any) -> None:
    assert error.field == _path(loc), (error.field, loc)
    assert not any(words in error.message for words in PYDANTIC_WORDS), error.message
    for number in _numbers(limits):
        assert number in error.message, (number, error.message)
    if loc == ("vllm_config",):  # the reader refuses an over-long YAML first, naming its range
        return
    assert error.message.startswith(subject(loc) + " "), error.message
    if limits.numeric:
        assert f" {value} is out of range: give " in error.message, error.message


def test_the_plan_document_has_bounded_fields_of_every_kind() -> None:
    """The walk finds the bounds where pydantic keeps them: a Field, a list item's Annotated, a tuple."""
    found = {_path(loc) for loc, _ in _cases(PlanDocument)}
    assert {"engine.gpu_memory_utilization", "layout.tp", "policy.growth_reserve", "whatif.gpu_memory_utilization",
            "policy.activation_points[0][0]", "engine.lora.target_modules[0]", "ranks", "title",
            "model.safetensors_index.metadata.total_size", "engine.speculative.model.name"} <= found, found


def _id(value: object) -> str:
    return _path(value) if isinstance(value, tuple) else ""


@pytest.mark.parametrize(("loc", "limits"), _cases(PlanDocument), ids=_id)
def test_every_bounded_plan_field_says_what_where_and_its_range(loc: tuple[int | str, ...], limits: Limits) -> None:
    value = _bad_value(loc, limits)
    with pytest.raises(InputError) as caught:
        validate_plan(_document(PLAN_BASE, loc, value))
    _check(caught.value, loc, limits, value)


@pytest.mark.parametrize(("loc", "limits"), _cases(SizingDocument), ids=_id)
def test_every_bounded_sizing_field_says_what_where_and_its_range(loc: tuple[int | str, ...], limits: Limits) -> None:
    value = _bad_value(loc, limits)
    with pytest.raises(InputError) as caught:
        validate_sizing(_document(SIZING_BASE, loc, value))
    _check(caught.value, loc, limits, value)


@pytest.mark.parametrize(("section", "value", "message"), [
    ({"engine": {"gpu_memory_utilization": 1.7}}, 1.7,
     "gpu_memory_utilization 1.7 is out of range: give a fraction in (0, 1]"),
    ({"engine": {"gpu_memory_utilization": 0}}, 0,
     "gpu_memory_utilization 0 is out of range: give a fraction in (0, 1]"),
    ({"policy": {"growth_reserve": 1}}, 1, "growth_reserve 1 is out of range: give a fraction in [0, 1)"),
    ({"layout": {"tp": 0}}, 0, "tp 0 is out of range: give a whole number from 1 to 4,096"),
    ({"engine": {"max_model_len": 0}}, 0, "max_model_len 0 is out of range: give a whole number from 1 to 100,000,000"),
])
def test_the_words_of_a_bound(section: dict[str, Any], value: object, message: str) -> None:
    with pytest.raises(InputError) as caught:
        validate_plan({**PLAN_BASE, **section})
    assert caught.value.message == message


def test_the_cli_says_it_in_the_same_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**PLAN_BASE, "engine": {"gpu_memory_utilization": 1.7}}))
    assert main(["plan", str(path)]) == 2
    assert capsys.readouterr().err.strip() == ("kvledger: error: engine.gpu_memory_utilization: "
                                               "gpu_memory_utilization 1.7 is out of range: give a fraction in (0, 1]")
