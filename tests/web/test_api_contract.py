"""The API contract (issue 12 item 9): schemathesis generates requests for every operation the
OpenAPI document declares and sends them in-process to the ASGI app (on a migrated SQLite
database); every reply must be no server error, with a declared status code, a declared content
type and a body that matches the declared schema. Bounded: a few examples per operation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.generation.case import Case

from app.services.demo_data import prepare_database
from app.settings import Settings
from app.web.app import create_app

CHECKS: list[Callable[..., Any]] = [checks.not_a_server_error, checks.status_code_conformance,
                                    checks.content_type_conformance, checks.response_schema_conformance]
EXAMPLES = 6


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("contract") / "kvledger.sqlite3"
    app_settings = Settings(database_url=f"sqlite:///{path}", demo_data=True, sim_rate_per_min=10_000,
                            sim_rate_burst=1000)
    prepare_database(app_settings)
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(app_settings))


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_keeps_its_contract(case: Case[Any]) -> None:
    case.call_and_validate(checks=CHECKS)


def test_bodies_carry_their_real_schemas_and_errors_their_one_shape() -> None:
    document = create_app(Settings(database_url="sqlite://")).openapi()
    paths, components = document["paths"], document["components"]["schemas"]

    def body_ref(method: str, path: str, media: str = "application/json") -> str:
        ref: str = paths[path][method]["requestBody"]["content"][media]["schema"]["$ref"]
        return ref.rsplit("/", 1)[1]

    assert body_ref("post", "/api/v1/plan") == body_ref("post", "/api/v1/plans") == "PlanDocument"
    assert body_ref("post", "/api/v1/simulate") == body_ref("post", "/api/v1/sim/jobs") == "SimulationDocument"
    assert body_ref("post", "/api/v1/size") == "SizingDocument"
    assert set(components["PlanComparison"]["required"]) == {"a", "b"}
    for path in ("/api/v1/import/log", "/api/v1/import/nvidia-smi"):  # the text imports' three body forms
        content = paths[path]["post"]["requestBody"]["content"]
        assert set(content) == {"application/json", "multipart/form-data", "application/x-www-form-urlencoded"}
        assert all("text" in form["schema"]["properties"] for form in content.values()), path
        assert "file" in content["multipart/form-data"]["schema"]["properties"]
        assert content["application/json"]["schema"]["required"] == ["text"]
    assert {"model", "gpu", "ranks", "layout"} <= set(components["PlanDocument"]["properties"])
    assert "HTTPValidationError" not in components  # FastAPI's 422 shape is never what KV Ledger sends
    for path, operations in paths.items():
        for method, op in operations.items():
            codes = set(op["responses"])
            assert "422" in codes, (method, path)
            assert method == "get" or {"401", "403"} <= codes, (method, path)
            assert "requestBody" not in op or {"400", "413"} <= codes, (method, path)
            assert "{" not in path or "404" in codes, (method, path)
            for code, response in op["responses"].items():
                if code[0] in "45":
                    assert response["content"]["application/json"]["schema"]["required"] == ["error"]
    assert "409" in paths["/api/v1/deployments"]["post"]["responses"]
    assert {"429", "503"} <= set(paths["/api/v1/sim/jobs"]["post"]["responses"])
