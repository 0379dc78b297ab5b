#!/bin/bash
# cardboxd's database role and database, made once by the postgres image
# when it initialises an empty data directory (docker-compose.yml mounts
# this file in /docker-entrypoint-initdb.d/). cardboxd logs in as this
# role, never as the superuser: it owns the database (and so its public
# schema, where the migrations make the tables) and may create the roles
# the migrations make (CREATEROLE), but it is no superuser, cannot bypass
# row-level security, create databases or replicate (see docs/security.md,
# "Isolation in Postgres").
#
# The password is the one in the .pgpass-format secret cardboxd reads
# (deploy/make-secrets.sh makes it). CARDBOX_DB_USER and CARDBOX_DB_NAME
# name the role and the database (default: cardbox, cardbox; the database
# URL in docker-compose.yml must name the same). Like the image's own
# entrypoint it runs with set -eo pipefail, so that it behaves the same
# whether the entrypoint runs it (executable) or sources it.
set -eo pipefail

role=${CARDBOX_DB_USER:-cardbox}
db=${CARDBOX_DB_NAME:-cardbox}
pgpass=${CARDBOX_DB_PGPASS_FILE:-/run/secrets/cardbox_db_pgpass}

line=$(head -n 1 "$pgpass")
password=${line#\*:\*:\*:\*:}
if [ "$password" = "$line" ] || [ -z "$password" ] || [[ $password == *[:\\]* ]]; then
	echo "init-cardbox.sh: $pgpass: want one line *:*:*:*:PASSWORD, the password without ':' or '\\'" >&2
	exit 1
fi

psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
	-v role="$role" -v db="$db" -v password="$password" <<'SQL'
CREATE ROLE :"role" LOGIN PASSWORD :'password' NOSUPERUSER CREATEROLE NOCREATEDB NOBYPASSRLS NOREPLICATION;
CREATE DATABASE :"db" OWNER :"role";
SQL
echo "init-cardbox.sh: made role $role and database $db"
