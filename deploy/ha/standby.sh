#!/bin/sh
# The standby: clone the primary once (-R writes primary_conninfo and standby.signal), then run
# as a hot standby streaming from it. After a promotion it is the primary and stays one.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h pg-primary -U "$POSTGRES_USER" -d "$POSTGRES_DB"; do sleep 1; done
  PGPASSWORD="$REPLICATION_PASSWORD" pg_basebackup -h pg-primary -U replicator \
    -D "$PGDATA" -R -X stream -c fast
  chmod 700 "$PGDATA"
fi
exec postgres -c hot_standby=on
