"""Security headers on every response (added by `app.web.edge.Edge`;
`app.web.errors` sets them on a 500).

The Content-Security-Policy is defence in depth for "user text is inert": pages load scripts
only from this origin (no inline scripts, no eval — htmx runs with allowEval off), styles from
this origin plus the inline styles plotly.js sets on its SVG, images from this origin or data:
URLs, and nothing may frame the app.
"""

from __future__ import annotations

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]
