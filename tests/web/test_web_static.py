"""Static assets: hashed URLs, immutable caching, gzip, no CDN, and the first-load budget."""

from __future__ import annotations

import re
from pathlib import Path

from .support import TestClient

ROOT = Path(__file__).resolve().parents[2]
ASSET_RE = re.compile(r'(?:src|href|content)="(/static/[^"]+)"')  # content: the chart library, loaded after paint
FIRST_LOAD_BUDGET_BYTES = 600 * 1024


def _assets(html: str) -> list[str]:
    return ASSET_RE.findall(html)


def test_pages_link_hashed_assets_served_immutable_and_gzipped(client: TestClient) -> None:
    html = client.get("/plan?tp=2").text
    urls = _assets(html)
    assert any("htmx" in u for u in urls) and any("plotly" in u for u in urls) and any("app.js" in u for u in urls)
    for url in urls:
        assert re.match(r"^/static/[0-9a-f]{12}/", url), url
        response = client.get(url, headers={"Accept-Encoding": "gzip"})
        assert response.status_code == 200
        assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
        if url.endswith((".js", ".css", ".svg")):
            assert response.headers["content-encoding"] == "gzip"
        assert "Accept-Encoding" in response.headers["vary"]


def test_etag_revalidation_and_stale_hash(client: TestClient) -> None:
    url = next(u for u in _assets(client.get("/").text) if u.endswith("app.js"))  # app.css is inline (base.html)
    first = client.get(url)
    again = client.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    stale = "/static/000000000000/" + url.split("/", 3)[3]
    assert client.get(stale).status_code == 404
    plain = client.get("/static/app.css")
    assert plain.status_code == 200 and "must-revalidate" in plain.headers["cache-control"]
    assert client.get("/static/../app/settings.py").status_code == 404
    assert client.get("/static/vendor/README.md").status_code == 404


def test_html_is_gzipped(client: TestClient) -> None:
    response = client.get("/plan?tp=2", headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"


def test_no_cdn_or_external_urls_in_pages_templates_or_own_assets(client: TestClient) -> None:
    external = re.compile(r'(?:src|href)="(?:https?:)?//', re.IGNORECASE)
    for url in ("/", "/plan?tp=4", "/plan?base=seed000", "/import", "/compare", "/docs"):
        html = client.get(url).text
        assert not external.search(html), url
        assert "cdn" not in html.lower(), url
    own = [*ROOT.joinpath("templates").rglob("*.html"), ROOT / "static" / "app.js", ROOT / "static" / "app.css"]
    for path in own:
        text = path.read_text()
        assert "cdn" not in text.lower() and "//unpkg" not in text and "jsdelivr" not in text, path


def test_first_page_load_transfers_at_most_600_kb_compressed(client: TestClient) -> None:
    """The heaviest first page (the plan page: htmx + plotly + css + js + html), gzipped."""
    page = client.get("/plan?model=llama-3.1-70b&tp=4", headers={"Accept-Encoding": "gzip"})
    total = page.num_bytes_downloaded  # bytes on the wire, before httpx decodes the gzip body
    assert page.headers["content-encoding"] == "gzip"
    for url in _assets(page.text):
        total += client.get(url, headers={"Accept-Encoding": "gzip"}).num_bytes_downloaded
    assert total <= FIRST_LOAD_BUDGET_BYTES, total


def test_security_headers_on_pages(client: TestClient) -> None:
    response = client.get("/")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-eval" not in csp and "frame-ancestors 'none'" in csp
    assert response.headers["x-content-type-options"] == "nosniff"


def test_startup_objects_are_frozen_out_of_full_collections() -> None:
    import gc

    from app.web.app import freeze_startup_objects

    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() > 10_000  # the modules and the app, at least
    finally:
        gc.unfreeze()
