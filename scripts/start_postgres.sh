#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster for the postgres-marked tests and print its URL.
#
#   eval "$(scripts/start_postgres.sh --export)"   # sets CITELOCK_TEST_POSTGRES_URL and CITELOCK_PG_DIR
#   pytest -m postgres
#   scripts/start_postgres.sh --stop "$CITELOCK_PG_DIR"
#
# Installs the server with apt-get if it is missing. The cluster lives in a fresh temporary directory, listens
# on 127.0.0.1 only, on a free port, and trusts local connections (test use only). PostgreSQL refuses to run
# as root, so when run as root the cluster runs as the `postgres` system user.
set -euo pipefail

if [[ "${1:-}" == "--stop" ]]; then
    dir="${2:?usage: start_postgres.sh --stop DIR}"
    owner="$(stat -c %U "$dir")"
    bindir="$(cat "$dir/bindir")"
    if [[ "$(id -u)" == 0 && "$owner" != root ]]; then
        runuser -u "$owner" -- "$bindir/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
    else
        "$bindir/pg_ctl" -D "$dir/data" -m fast stop >/dev/null
    fi
    rm -rf "$dir"
    exit 0
fi

export_mode=0
[[ "${1:-}" == "--export" ]] && export_mode=1

find_bindir() {
    local candidate
    for candidate in /usr/lib/postgresql/*/bin; do
        [[ -x "$candidate/initdb" && -x "$candidate/postgres" ]] && { echo "$candidate"; return 0; }
    done
    if command -v initdb >/dev/null && command -v postgres >/dev/null; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

if ! bindir="$(find_bindir)"; then
    if [[ "$(id -u)" != 0 ]]; then
        echo "start_postgres.sh: PostgreSQL server not installed and not root: apt-get install postgresql" >&2
        exit 1
    fi
    echo "start_postgres.sh: installing postgresql with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bindir="$(find_bindir)"
fi

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
dir="$(mktemp -d -t citelock-pg.XXXXXX)"
echo "$bindir" > "$dir/bindir"

run=()
if [[ "$(id -u)" == 0 ]]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    chown -R postgres: "$dir"
    chmod 755 "$dir"
    run=(runuser -u postgres --)
fi

"${run[@]}" "$bindir/initdb" -D "$dir/data" -U citelock --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
"${run[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=100" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
"${run[@]}" "$bindir/createdb" -h 127.0.0.1 -p "$port" -U citelock citelock_test

url="postgresql://citelock@127.0.0.1:$port/citelock_test"
if (( export_mode )); then
    echo "export CITELOCK_TEST_POSTGRES_URL='$url'"
    echo "export CITELOCK_PG_DIR='$dir'"
else
    echo "$url"
    echo "start_postgres.sh: cluster in $dir; stop with: scripts/start_postgres.sh --stop $dir" >&2
fi
