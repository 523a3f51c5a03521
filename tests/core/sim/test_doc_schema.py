"""The simulation document's JSON schema (OpenAPI) states what `io.parse` accepts: the same keys
in every object (the parser names its allowed keys when it refuses one) and the same bounds."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.sim import io
from app.core.sim.doc_schema import simulation_document_schema

SCHEMA = simulation_document_schema()
POOL = {"blocks": 1000, "block_size": 16}


def _allowed(doc: dict[str, Any]) -> set[str]:
    with pytest.raises(io.SimInputError) as info:
        io.parse(doc)
    message = str(info.value)
    assert "unknown field (allowed: " in message, message
    return set(message.split("(allowed: ", 1)[1].rstrip(")").split(", "))


def _props(*path: str) -> set[str]:
    node = SCHEMA
    for key in path:
        node = node["properties"][key]
    return set(node["properties"])


@pytest.mark.parametrize(("doc", "path"), [
    ({"pool": POOL, "zzz": 1}, ()),
    ({"pool": {**POOL, "zzz": 1}}, ("pool",)),
    ({"pool": POOL, "workload": {"zzz": 1}}, ("workload",)),
    ({"pool": POOL, "scheduler": {"zzz": 1}}, ("scheduler",)),
    ({"pool": POOL, "cost_model": {"zzz": 1}}, ("cost_model",)),
])
def test_every_object_has_the_parsers_keys(doc: dict[str, Any], path: tuple[str, ...]) -> None:
    assert _props(*path) == _allowed(doc)


def test_length_distributions_have_the_parsers_keys() -> None:
    lognormal = SCHEMA["properties"]["workload"]["properties"]["prompt_tokens"]["anyOf"][1]
    assert set(lognormal["properties"]) == _allowed({"pool": POOL, "workload": {"prompt_tokens": {"zzz": 1}}})
    inner = {"lognormal": {"mean": 5, "sigma": 1, "zzz": 1}}
    assert set(lognormal["properties"]["lognormal"]["properties"]) == _allowed(
        {"pool": POOL, "workload": {"prompt_tokens": inner}})


@pytest.mark.parametrize(("path", "key"), [
    (("pool",), "blocks"), (("pool",), "block_size"), ((), "seed"),
    (("workload",), "shared_prefix_tokens"), (("workload",), "prefix_groups"),
    (("workload",), "requests_per_level"), (("scheduler",), "max_num_seqs"),
])
def test_integer_bounds_are_the_parsers(path: tuple[str, ...], key: str) -> None:
    node = SCHEMA
    for part in path:
        node = node["properties"][part]
    spec = node["properties"][key]
    for value, ok in ((spec["minimum"], True), (spec["maximum"], True), (spec["minimum"] - 1, False),
                      (spec["maximum"] + 1, False)):
        doc: dict[str, Any] = {"pool": dict(POOL), "workload": {"output_tokens": [1], "prompt_tokens": [1]}}
        target = doc
        for part in path:
            target = target.setdefault(part, {})
        target[key] = value
        if not ok:
            with pytest.raises(io.SimInputError) as info:
                io.parse(doc)
            assert key in info.value.field_path
        else:
            try:
                io.parse(doc)
            except io.SimInputError as exc:  # another rule (e.g. the longest request) may refuse it
                assert key not in exc.field_path or "must be between" not in str(exc)
