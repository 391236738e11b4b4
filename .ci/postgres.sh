#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the tests (installing PostgreSQL from Debian when it is
# missing) and print a DSN of a role that may create databases. Idempotent: a server already
# running in the folder is reused. Needs root (it runs the server as the postgres user).
#   AUTO_PG_DIR   folder of the cluster (default /tmp/auto-test-pg)
#   AUTO_PG_PORT  TCP port on 127.0.0.1 (default 55432)
set -euo pipefail
DIR="${AUTO_PG_DIR:-/tmp/auto-test-pg}"
PORT="${AUTO_PG_PORT:-55432}"
find_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
PGBIN="$(find_bin || true)"
if [ -z "$PGBIN" ]; then
  echo "installing PostgreSQL (apt-get install postgresql)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  PGBIN="$(find_bin)"
fi
as_pg() { if [ "$(id -un)" = postgres ]; then bash -c "$1"; else su postgres -s /bin/bash -c "$1"; fi; }
if ! as_pg "'$PGBIN/pg_ctl' -D '$DIR/data' status" >/dev/null 2>&1; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  chown postgres "$DIR"
  as_pg "'$PGBIN/initdb' -D '$DIR/data' -A trust -U postgres -E UTF8 --locale=C.UTF-8" >&2
  as_pg "'$PGBIN/pg_ctl' -D '$DIR/data' -l '$DIR/server.log' -w -t 60 start -o \"-p $PORT -k '$DIR' -c listen_addresses=127.0.0.1 -c max_connections=200\"" >&2
fi
as_pg "'$PGBIN/psql' -q -h 127.0.0.1 -p $PORT -U postgres -d postgres -v ON_ERROR_STOP=1 -c \"DO \\\$\\\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'auto') THEN CREATE ROLE auto LOGIN CREATEDB PASSWORD 'auto'; END IF; END \\\$\\\$\"" >&2
echo "postgresql://auto:auto@127.0.0.1:$PORT/postgres"
