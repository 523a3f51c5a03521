"""Saved plans (/p/{slug}) and deployments with their ledger history (/d): ``routes`` is the router.

``plans`` and ``deployments`` hold the routes, ``present`` the page contexts; the database, the
per-request session and the write guard come from ``app.web.deps``.
"""
