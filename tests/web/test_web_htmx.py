"""The one htmx helper: request headers read in one place, Vary merged, replace-url written."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from app.web import htmx


def _request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "query_string": b""})


def test_plain_request_is_not_htmx() -> None:
    details = htmx.details(_request({}))
    assert not details.request and not details.wants_fragment and details.target is None


def test_htmx_request_details() -> None:
    details = htmx.details(_request({
        "HX-Request": "true", "HX-Target": "results", "HX-Trigger-Name": "util",
        "HX-Current-URL": "http%3A%2F%2Fx%2Fplan%3Ftp%3D2", "HX-Current-URL-URI-AutoEncoded": "true",
    }))
    assert details.wants_fragment
    assert details.target == "results" and details.trigger_name == "util"
    assert details.current_url == "http://x/plan?tp=2"


def test_boosted_and_history_restore_want_the_whole_page() -> None:
    assert not htmx.details(_request({"HX-Request": "true", "HX-Boosted": "true"})).wants_fragment
    restore = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
    assert not htmx.details(_request(restore)).wants_fragment


def test_vary_is_merged_once_and_replace_url_is_set() -> None:
    response = Response(headers={"Vary": "Accept-Encoding"})
    htmx.add_vary(response)
    htmx.add_vary(response)
    htmx.replace_url(response, "/plan?tp=2")
    assert response.headers["vary"] == "Accept-Encoding, HX-Request"
    assert response.headers["hx-replace-url"] == "/plan?tp=2"


def test_header_names_in_any_case_and_first_value_wins() -> None:
    raw = [(b"Hx-Request", b"true"), (b"HX-TARGET", b"results"), (b"hx-target", b"other"), (b"hxx-request", b"no"),
           (b"x-hx-boosted", b"true"), (b"hx-trigger", b"caf%C3%A9"), (b"HX-Trigger-URI-AutoEncoded", b"true")]
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "query_string": b""})
    details = htmx.details(request)
    assert details.request and not details.boosted
    assert details.target == "results" and details.trigger == "café"
