"""Storage: SQLAlchemy 2 typed models, the database and its sessions, repository functions.

``models`` (tables), ``session`` (``Database``/``open_database``, engines, write sessions,
migrations), ``repository`` (queries and writes), ``exchange`` (export/import of a deployment;
it uses the repository, never the reverse). The schema is owned by the Alembic migrations in
``migrations/``; nothing here calls ``create_all``. Storage imports no service and no web code.
"""
