# KV Ledger dashboard: the same app the README's first command runs, on SQLite in a volume.
# Installed editable so templates/, static/ and migrations/ stay beside the package.
#   docker build -t kvledger . && docker run -p 8000:8000 -v kvledger-data:/data kvledger
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    KVLEDGER_DATA_DIR=/data

WORKDIR /srv/kvledger
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY templates ./templates
COPY static ./static
COPY migrations ./migrations
RUN pip install -e . \
    && useradd --system --uid 10001 --home-dir /srv/kvledger kvledger \
    && mkdir -p /data && chown kvledger /data

USER kvledger
VOLUME ["/data"]
EXPOSE 8000
CMD ["kvledger", "serve", "--host", "0.0.0.0", "--port", "8000"]
