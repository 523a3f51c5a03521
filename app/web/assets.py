"""Static assets: content-hashed URLs, immutable caching, gzip compressed once in memory.

At start-up every servable file under `static/` is read and hashed (sha256, 12 hex digits);
each compressible one is gzip-compressed once per app, when a client first asks for it gzipped
(compressing them all takes ~0.2 s, which an app that never serves them, e.g. in a test, skips;
a server compresses them at start-up). Templates link `/static/<hash>/<path>`; those responses are
`Cache-Control: public, max-age=31536000, immutable`. A stale hash is a 404 (never old bytes
under a new name or the reverse). The unhashed path `/static/<path>` also works, revalidated
with an ETag, for hand-typed URLs.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
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
    compressible: bool
    content_type: str

    @property
    def url(self) -> str:
        return f"/static/{self.digest}/{self.path}"


def load_assets(directory: Path) -> dict[str, Asset]:
    """Read, hash and compress every servable file under `directory`."""
    assets: dict[str, Asset] = {}
    for file in sorted(directory.rglob("*")):
        suffix = file.suffix.lower()
        if not file.is_file() or suffix not in CONTENT_TYPES:
            continue
        body = file.read_bytes()
        digest = hashlib.sha256(body).hexdigest()[:12]
        rel = file.relative_to(directory).as_posix()
        assets[rel] = Asset(rel, digest, body, suffix in COMPRESSIBLE, CONTENT_TYPES[suffix])
    return assets


class StaticAssets:
    """The asset manifest of one app: URLs for templates, responses for the /static route."""

    def __init__(self, directory: Path) -> None:
        self.assets = load_assets(directory)
        self._gzipped: dict[str, bytes] = {}  # by path: each compressible asset, once compressed
        self._lock = threading.Lock()

    def gzipped(self, asset: Asset) -> bytes:
        """The asset's gzip body (level 9, no mtime: the same bytes every time), made on first use."""
        found = self._gzipped.get(asset.path)
        if found is None:
            with self._lock:
                found = self._gzipped.get(asset.path)
                if found is None:
                    found = self._gzipped[asset.path] = gzip.compress(asset.body, compresslevel=9, mtime=0)
        return found

    def precompress(self) -> None:
        """Compress every compressible asset now (a server does it at start-up, before its first client)."""
        for asset in self.assets.values():
            if asset.compressible:
                self.gzipped(asset)

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
        if asset.compressible and "gzip" in request.headers.get("accept-encoding", ""):
            body = self.gzipped(asset)
            headers["Content-Encoding"] = "gzip"
        return Response(body, headers=headers, media_type=asset.content_type)
