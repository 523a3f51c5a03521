#!/usr/bin/env bash
# Start a throwaway PostgreSQL server on 127.0.0.1 for the tests; prints shell exports.
#   eval "$(bash scripts/start-postgres.sh)"      start, export KVLEDGER_TEST_PG_URL
#   bash scripts/start-postgres.sh --stop DIR     stop the server started in DIR
set -euo pipefail
bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
if [ "${1:-}" = "--stop" ]; then
  dir=$2
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$bindir/pg_ctl -D $dir/data -m immediate stop"
  else "$bindir/pg_ctl" -D "$dir/data" -m immediate stop; fi
  rm -rf "$dir"
  exit 0
fi
dir=$(mktemp -d /tmp/kvledger-pg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
run() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
run "$bindir/initdb -D $dir/data -U kvledger --auth=trust -E UTF8" >/dev/null
run "$bindir/pg_ctl -D $dir/data -l $dir/log -o '-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=200 -c fsync=off' -w start" >/dev/null
run "$bindir/createdb -h 127.0.0.1 -p $port -U kvledger kvledger_test"
echo "export KVLEDGER_TEST_PG_URL=postgresql+psycopg://kvledger@127.0.0.1:$port/kvledger_test"
echo "export KVLEDGER_PG_DIR=$dir"
