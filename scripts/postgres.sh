#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the shared journal's tests and demo.
#
#   scripts/postgres.sh start DIR   create (once) and start a cluster under DIR; prints its URL
#   scripts/postgres.sh stop DIR    stop it (nothing to do when it is not running)
#   scripts/postgres.sh url DIR     print the URL of the cluster under DIR
#   scripts/postgres.sh check DIR   whether PostgreSQL is installed (exit 0, or 3 saying how)
#
# The cluster listens on a unix socket in DIR only (no TCP), so clusters in different
# directories never collide even on the same port; trust authentication, user and database
# `postgres`. The data lives in DIR/data, the server log in DIR/postgresql.log.
# PGPORT (default 55432) names the socket; PG_BIN (default Debian's
# /usr/lib/postgresql/15/bin) holds initdb, pg_ctl and postgres.
# As root the server runs as the `postgres` user (PostgreSQL refuses to run as root) and DIR
# is handed to it; as anyone else it runs as you.
#
# Exit status: 0 done, 2 usage, 3 PostgreSQL is not installed (nothing was done), 1 failed.
# This script installs nothing.
set -euo pipefail

usage() {
    echo "usage: $0 start|stop|url|check DIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
cmd=$1
case "$cmd" in start | stop | url | check) ;; *) usage ;; esac

port=${PGPORT:-55432}
bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
mkdir -p "$2"
dir=$(cd "$2" && pwd -P)
data=$dir/data

# Percent-encodes a string for the host part of a URL (a unix socket directory).
urlencode() {
    local s=$1 out= c i
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case "$c" in
        [A-Za-z0-9._~-]) out+=$c ;;
        *) out+=$(printf '%%%02X' "'$c") ;;
        esac
    done
    printf '%s' "$out"
}

url="postgres://postgres@$(urlencode "$dir"):$port/postgres"
if [ "$cmd" = url ]; then
    echo "$url"
    exit 0
fi

if [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
    echo "PostgreSQL 15 is not installed: no initdb/pg_ctl in $bin." >&2
    echo "Install it with: apt-get install postgresql (Debian 12), or set PG_BIN to its bin directory." >&2
    exit 3
fi
if [ "$cmd" = check ]; then
    exit 0
fi

# Runs a PostgreSQL program as the user that owns the cluster.
as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

running() {
    [ -f "$data/PG_VERSION" ] && as_owner "$bin/pg_ctl" status -D "$data" >/dev/null 2>&1
}

if [ "$cmd" = stop ]; then
    if running; then
        # A scratch cluster: on a loaded machine a fast shutdown's checkpoint may outlast
        # its minute; then stop it at once (nothing in it is kept).
        as_owner "$bin/pg_ctl" stop -D "$data" -m fast -w -t 60 >/dev/null ||
            as_owner "$bin/pg_ctl" stop -D "$data" -m immediate -w -t 60 >/dev/null
    fi
    exit 0
fi

if running; then
    echo "$url"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    if ! id postgres >/dev/null 2>&1; then
        echo "running as root, but there is no postgres user to run the server as" \
            "(the postgresql package creates it: apt-get install postgresql)" >&2
        exit 1
    fi
    chown postgres: "$dir"
    if ! runuser -u postgres -- test -w "$dir"; then
        echo "the postgres user cannot reach $dir: a directory above it is not searchable by" \
            "others; choose a DIR under a directory such as /tmp" >&2
        exit 1
    fi
fi

if [ ! -f "$data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$data" -U postgres -A trust -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    # In the cluster's own configuration, so that `pg_ctl restart` keeps it.
    cat >>"$data/postgresql.conf" <<EOF
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
EOF
fi

if ! as_owner "$bin/pg_ctl" start -D "$data" -l "$dir/postgresql.log" -w -t 60 >/dev/null; then
    echo "PostgreSQL did not start; its log, $dir/postgresql.log, ends with:" >&2
    tail -n 20 "$dir/postgresql.log" >&2 || true
    exit 1
fi
echo "$url"
