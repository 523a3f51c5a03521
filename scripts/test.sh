#!/usr/bin/env bash
# One script that people and CI both run: set up on a fresh machine, then lint, type-check and test.
# Installs (as root, Debian) the headless Chromium the browser tests drive and the PostgreSQL
# server the storage tests run against, starts that server on loopback, and runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "missing system packages: ${need_apt[*]} (run as root or install them)" >&2
  fi
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'

# A throwaway PostgreSQL server on loopback for the storage tests (stopped on exit).
if [ -z "${KVLEDGER_TEST_PG_URL:-}" ] && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  eval "$(bash scripts/start-postgres.sh)"
  trap 'bash scripts/start-postgres.sh --stop "$KVLEDGER_PG_DIR" >/dev/null 2>&1 || true' EXIT
fi

.venv/bin/ruff check .
.venv/bin/mypy
.venv/bin/python -m pytest -n 2 "$@"
