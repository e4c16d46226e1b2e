# Sourced by tests/run.sh: make a PostgreSQL reachable through the libpq PG* variables.
# Use the one already running (PGHOST/PGPORT, else 127.0.0.1:5432); otherwise, when the
# server binaries exist, start a throwaway cluster for this test run and stop it afterwards.
# PostgreSQL refuses to run as root, so the cluster runs as the postgres user (or nobody).

pg_reachable() {
  pg_isready -q -h "$1" -p "$2" -t 3 2>/dev/null
}

pg_bindir() {
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) "$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/x)")"; do
    [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && { echo "$dir"; return 0; }
  done
  return 1
}

pg_start_throwaway() {
  local bindir=$1 owner=postgres port=${CRONWRAP_TEST_PGPORT:-54329}
  id "$owner" >/dev/null 2>&1 || owner=nobody
  PG_THROWAWAY_DIR=$(mktemp -d /tmp/cronwrap-pg.XXXXXX)
  chmod 755 "$PG_THROWAWAY_DIR"
  local as=()
  if [ "$(id -u)" = 0 ]; then
    chown "$owner" "$PG_THROWAWAY_DIR"
    as=(runuser -u "$owner" --)
  fi
  "${as[@]}" "$bindir/initdb" -D "$PG_THROWAWAY_DIR/data" -U postgres -A trust >/dev/null
  "${as[@]}" "$bindir/pg_ctl" -D "$PG_THROWAWAY_DIR/data" -l "$PG_THROWAWAY_DIR/log" -w \
    -o "-p $port -k $PG_THROWAWAY_DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null
  PG_THROWAWAY_STOP=("${as[@]}" "$bindir/pg_ctl" -D "$PG_THROWAWAY_DIR/data" -m immediate stop)
  export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PGDATABASE=postgres
  echo "tests: started a throwaway PostgreSQL on 127.0.0.1:$port ($PG_THROWAWAY_DIR)"
}

pg_stop_throwaway() {
  if [ -n "${PG_THROWAWAY_DIR:-}" ]; then
    "${PG_THROWAWAY_STOP[@]}" >/dev/null 2>&1 || true
    rm -rf "$PG_THROWAWAY_DIR"
  fi
}

pg_ensure() {
  local host=${PGHOST:-127.0.0.1} port=${PGPORT:-5432} bindir
  if pg_reachable "$host" "$port"; then
    export PGHOST=$host PGPORT=$port PGUSER=${PGUSER:-postgres} PGDATABASE=${PGDATABASE:-postgres}
    return 0
  fi
  if bindir=$(pg_bindir); then
    pg_start_throwaway "$bindir"
    return 0
  fi
  echo "tests: no PostgreSQL reachable at $host:$port and no server binaries to start one" >&2
  return 1
}
