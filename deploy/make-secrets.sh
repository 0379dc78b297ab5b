#!/bin/sh
# Makes the secrets docker-compose.yml mounts, in deploy/secrets/ (or the
# directory given), each only if it is missing, so running it again
# changes nothing. Needs openssl, base64 and tr.
#
#   operator_key       the first operator key's secret: cardboxd creates the
#                      key from it at start-up (--operator-key-file)
#   postgres_password  the Postgres superuser's password (maintenance only)
#   cardbox_db_pgpass  the password of cardboxd's own database role, in
#                      .pgpass format (*:*:*:*:PASSWORD)
#
# The directory is private to you (0700); the files in it are 0644, since
# the containers read them as their own users (docker compose mounts them
# as they are, without changing owner or mode).
set -eu

dir=${1:-$(dirname "$0")/secrets}
mkdir -p "$dir"
chmod 700 "$dir"
umask 022

# new_secret NAME PATTERN: runs the script on standard input and keeps its
# output as $dir/NAME if it is one line matching PATTERN (an extended
# regular expression); an existing $dir/NAME is kept as it is.
new_secret() {
	if [ -e "$dir/$1" ]; then
		echo "$dir/$1 exists: kept"
		return 0
	fi
	sh -eu > "$dir/$1.tmp"
	if [ "$(wc -l < "$dir/$1.tmp")" -ne 1 ] || ! grep -Eqx "$2" "$dir/$1.tmp"; then
		rm -f "$dir/$1.tmp"
		echo "making $dir/$1 failed: is openssl installed?" >&2
		exit 1
	fi
	mv "$dir/$1.tmp" "$dir/$1"
	echo "$dir/$1 made"
}

new_secret operator_key 'cbk_key_[0-9a-f]{16}_[A-Za-z0-9_-]{43}' <<'SCRIPT'
printf 'cbk_key_%s_%s\n' "$(openssl rand -hex 8)" "$(openssl rand 32 | base64 | tr '+/' '-_' | tr -d '=')"
SCRIPT
new_secret postgres_password '[0-9a-f]{64}' <<'SCRIPT'
openssl rand -hex 32
SCRIPT
new_secret cardbox_db_pgpass '\*:\*:\*:\*:[0-9a-f]{64}' <<'SCRIPT'
printf '*:*:*:*:%s\n' "$(openssl rand -hex 32)"
SCRIPT
