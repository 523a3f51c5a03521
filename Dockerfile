# KV Ledger dashboard: the same app the README's first command runs, on SQLite in a volume.
# Installed from the wheel (templates/, static/, migrations/ ship inside it as app/_shipped/),
# not from an editable tree.
#   docker build -t kvledger . && docker run -p 8000:8000 -v kvledger-data:/data kvledger
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml setup.py MANIFEST.in README.md alembic.ini ./
COPY app ./app
COPY templates ./templates
COPY static ./static
COPY migrations ./migrations
RUN pip wheel --no-cache-dir --no-deps -w /wheels .

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    KVLEDGER_DATA_DIR=/data

COPY --from=build /wheels /wheels
RUN pip install /wheels/kvledger-*.whl \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --home-dir /data kvledger \
    && mkdir -p /data && chown kvledger /data

USER kvledger
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000
CMD ["kvledger", "serve", "--host", "0.0.0.0", "--port", "8000"]
