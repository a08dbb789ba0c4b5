#!/bin/sh
# Runs once, when the primary's data directory is created: the role the standby replicates as,
# and synchronous replication from the next start on (ALTER SYSTEM: postgresql.auto.conf).
set -eu
psql -v ON_ERROR_STOP=1 -U "$POSTGRES_USER" -d "$POSTGRES_DB" \
  -c "CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD '$REPLICATION_PASSWORD'" \
  -c "ALTER SYSTEM SET synchronous_standby_names = '*'"
echo "host replication replicator all scram-sha-256" >> "$PGDATA/pg_hba.conf"
