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
# The clone carries the primary's synchronous_standby_names; promoted, this server has no
# standby of its own to wait for, so it must not wait (until a new standby is added).
exec postgres -c hot_standby=on -c synchronous_standby_names=
