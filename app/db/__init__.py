"""Storage: SQLAlchemy 2 typed models, engine/session factories, repository functions.

The schema is owned by the Alembic migrations in ``migrations/``; nothing here calls
``create_all``.
"""
