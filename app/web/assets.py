"""Static assets: content-hashed URLs, immutable caching, gzip compressed once in memory.

At start-up every servable file under `static/` is read, hashed (sha256, 12 hex digits) and
gzip-compressed once. Templates link `/static/<hash>/<path>`; those responses are
`Cache-Control: public, max-age=31536000, immutable`. A stale hash is a 404 (never old bytes
under a new name or the reverse). The unhashed path `/static/<path>` also works, revalidated
with an ETag, for hand-typed URLs.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "public, max-age=0, must-revalidate"

CONTENT_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
}
COMPRESSIBLE = {".js", ".css", ".svg"}

#: The vendored bundles the base template loads (see static/vendor/README.md).
HTMX_JS = "vendor/htmx-2.0.11.min.js"
PLOTLY_JS = "vendor/plotly-basic-4.1.1.min.js"


@dataclass(frozen=True)
class Asset:
    path: str
    digest: str
    body: bytes
    gzipped: bytes | None
    content_type: str

    @property
    def url(self) -> str:
        return f"/static/{self.digest}/{self.path}"


@functools.lru_cache(maxsize=64)
def _compress(digest: str, body: bytes) -> bytes:
    # Keyed on the content hash: several apps in one process (tests) compress each file once.
    return gzip.compress(body, compresslevel=9, mtime=0)


def load_assets(directory: Path) -> dict[str, Asset]:
    """Read, hash and compress every servable file under `directory`."""
    assets: dict[str, Asset] = {}
    for file in sorted(directory.rglob("*")):
        suffix = file.suffix.lower()
        if not file.is_file() or suffix not in CONTENT_TYPES:
            continue
        body = file.read_bytes()
        digest = hashlib.sha256(body).hexdigest()[:12]
        gzipped = _compress(digest, body) if suffix in COMPRESSIBLE else None
        rel = file.relative_to(directory).as_posix()
        assets[rel] = Asset(rel, digest, body, gzipped, CONTENT_TYPES[suffix])
    return assets


class StaticAssets:
    """The asset manifest of one app: URLs for templates, responses for the /static route."""

    def __init__(self, directory: Path) -> None:
        self.assets = load_assets(directory)

    def url(self, path: str) -> str:
        """The content-hashed URL of a static file (a KeyError names a missing asset early)."""
        return self.assets[path].url

    def response(self, request: Request, rest: str) -> Response:
        """Serve `/static/<hash>/<path>` (immutable) or `/static/<path>` (revalidated)."""
        head, _, tail = rest.partition("/")
        asset = self.assets.get(tail)
        if asset is not None and head == asset.digest:
            cache = IMMUTABLE
        else:
            asset = self.assets.get(rest)
            if asset is None:
                return Response("Not found", status_code=404, media_type="text/plain")
            cache = REVALIDATE
        etag = f'"{asset.digest}"'
        headers = {"Cache-Control": cache, "ETag": etag, "Vary": "Accept-Encoding"}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        body = asset.body
        if asset.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
            body = asset.gzipped
            headers["Content-Encoding"] = "gzip"
        return Response(body, headers=headers, media_type=asset.content_type)
