"""/docs renders Swagger UI over /openapi.json from vendored files, with no inline script."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient


def test_docs_serves_vendored_swagger_ui(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert 'id="swagger-ui"' in page.text
    scripts = re.findall(r'<script src="([^"]+)"', page.text)
    bundle = next(s for s in scripts if "swagger-ui-bundle.js" in s)
    assert bundle.startswith("/static/")
    assert client.get(bundle).status_code == 200
    assert not re.search(r"<script>(?!\s*</script>)", page.text)  # the CSP allows no inline script
    spec = client.get("/openapi.json").json()
    assert "/api/v1/plan" in spec["paths"]
