#!/bin/sh
# containers-postgres.sh: the entry point of the PostgreSQL stand-in scripts/containers.sh builds,
# doing what the official postgres image's does for pkg/testenv: POSTGRES_HOST_AUTH_METHOD and
# POSTGRES_DB on a fresh data folder, a first server for the set-up, then the real one (each
# logs "database system is ready to accept connections"), listening on every address.
set -eu
for bin in /usr/lib/postgresql/*/bin; do :; done
export PGDATA=/var/lib/postgresql/data
auth=${POSTGRES_HOST_AUTH_METHOD:-trust}
as_postgres() { runuser -u postgres -- "$@"; }
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
	as_postgres "$bin/initdb" -D "$PGDATA" -U postgres -A "$auth" -E UTF8 --no-locale
	echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
	echo "host all all all $auth" >>"$PGDATA/pg_hba.conf"
	as_postgres "$bin/pg_ctl" -D "$PGDATA" -o "-c listen_addresses=''" -w start
	if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
		as_postgres "$bin/psql" -h /run/postgresql -p 5432 -q -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$POSTGRES_DB\""
	fi
	as_postgres "$bin/pg_ctl" -D "$PGDATA" -m fast -w stop
fi
exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA"
