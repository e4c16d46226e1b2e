# Sourced by tests/run.sh: make a PostgreSQL reachable through the libpq PG* variables, and
# PgBouncer available. Use the server already running (PGHOST/PGPORT, else 127.0.0.1:5432)
# when the PG* user can log in to it; otherwise start a throwaway cluster for this test run
# from the server binaries, installing Debian's postgresql package first when there are none,
# and stop it afterwards. PostgreSQL refuses to run as root, so the cluster runs as the
# postgres user (or nobody). A function that fails leaves its reason, one line, in PG_ENV_ERROR.

PG_ENV_ERROR=

# Where Debian puts runuser and pgbouncer; a PATH without them (env -i, a user's) still finds them.
sbin_which() {
  PATH=$PATH:/usr/local/sbin:/usr/sbin:/sbin command -v "$1"
}

# Debian packages, installed quietly and only when missing. `apt-get update` only when the
# install fails (a fresh machine may have no package lists yet); apt's log is shown only then.
pkg_install() {
  local as=() log
  if [ "$(id -u)" != 0 ]; then
    if ! sudo -n true 2>/dev/null; then
      PG_ENV_ERROR="installing Debian's $* needs root (or sudo without a password)"
      return 1
    fi
    as=(sudo -n)
  fi
  if ! command -v apt-get >/dev/null; then
    PG_ENV_ERROR="cannot install $*: no apt-get on this machine"
    return 1
  fi
  echo "tests: installing Debian's $*"
  log=$(mktemp /tmp/cronwrap-apt.XXXXXX)
  local install=("${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y
                 -o Dpkg::Use-Pty=0 --no-install-recommends install "$@")
  if ! "${install[@]}" >"$log" 2>&1; then
    if ! { "${as[@]}" apt-get -q update >"$log" 2>&1 && "${install[@]}" >"$log" 2>&1; }; then
      PG_ENV_ERROR="apt-get install $* failed: $(grep -E '^(E|W):' "$log" | tail -n 1)"
      rm -f "$log"
      return 1
    fi
  fi
  rm -f "$log"
}

# Reachable, and the PG* user can log in: a server that answers but refuses the login (a
# password-protected cluster of another installation) is no use to the tests.
pg_reachable() {
  pg_isready -q -h "$1" -p "$2" -t 3 2>/dev/null &&
    PGCONNECT_TIMEOUT=3 psql -X -q -A -t -h "$1" -p "$2" -U "${PGUSER:-postgres}" \
      -d "${PGDATABASE:-postgres}" -c 'SELECT 1' >/dev/null 2>&1 </dev/null
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
    as=("$(sbin_which runuser)" -u "$owner" --)
  fi
  PG_THROWAWAY_STOP=("${as[@]}" "$bindir/pg_ctl" -D "$PG_THROWAWAY_DIR/data" -m immediate stop)
  # Called in an `||` list (tests/run.sh), where set -e does not apply: each step is checked.
  if ! "${as[@]}" "$bindir/initdb" -D "$PG_THROWAWAY_DIR/data" -U postgres -A trust >/dev/null; then
    PG_ENV_ERROR="initdb of a throwaway cluster in $PG_THROWAWAY_DIR failed"
    return 1
  fi
  if ! "${as[@]}" "$bindir/pg_ctl" -D "$PG_THROWAWAY_DIR/data" -l "$PG_THROWAWAY_DIR/log" -w \
      -o "-p $port -k $PG_THROWAWAY_DIR -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null; then
    PG_ENV_ERROR="the throwaway cluster did not start: $(tail -n 1 "$PG_THROWAWAY_DIR/log" 2>/dev/null)"
    return 1
  fi
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
  if ! bindir=$(pg_bindir); then
    pkg_install postgresql || return 1
    if ! bindir=$(pg_bindir); then
      PG_ENV_ERROR="no PostgreSQL at $host:$port, and none installed by Debian's postgresql package"
      return 1
    fi
  fi
  pg_start_throwaway "$bindir"
}

# The dashboard's browser test (tests/acceptance/test_serve_browser.py) runs Debian's chromium.
chromium_ensure() {
  command -v chromium >/dev/null && return 0
  pkg_install chromium || return 1
  command -v chromium >/dev/null && return 0
  PG_ENV_ERROR="Debian's chromium package installed no chromium executable"
  return 1
}

# The tests start their own PgBouncer (tests/conftest.py): only the executable is needed.
pgbouncer_ensure() {
  sbin_which pgbouncer >/dev/null && return 0
  pkg_install pgbouncer || return 1
  sbin_which pgbouncer >/dev/null && return 0
  PG_ENV_ERROR="Debian's pgbouncer package installed no pgbouncer executable"
  return 1
}

# The real-Prometheus test (tests/acceptance/test_prometheus.py) starts its own prometheus, with
# its own config, port and storage: only the executable is needed. Debian's package would start
# its own service at once (on :9090, with its own storage): a policy-rc.d that refuses keeps it
# stopped while the package is installed (one already there is left as it is, and so is a
# service someone started before).
prometheus_ensure() {
  local policy=/usr/sbin/policy-rc.d as=() ours= rc=0
  sbin_which prometheus >/dev/null && return 0
  [ "$(id -u)" = 0 ] || as=(sudo -n)
  if [ ! -e "$policy" ] && "${as[@]}" sh -c "printf '#!/bin/sh\\nexit 101\\n' >$policy &&
      chmod 755 $policy" 2>/dev/null; then
    ours=1
  fi
  pkg_install prometheus || rc=1
  [ -z "$ours" ] || "${as[@]}" rm -f "$policy"
  [ "$rc" = 0 ] || return 1
  sbin_which prometheus >/dev/null && return 0
  PG_ENV_ERROR="Debian's prometheus package installed no prometheus executable"
  return 1
}

# The ISO-8859-1 locale tests (tests/acceptance/test_damaged_input.py) build their locale with
# localedef from the sources of Debian's locales package: only the sources are needed.
locales_ensure() {
  [ -e /usr/share/i18n/locales/en_US ] && [ -e /usr/share/i18n/charmaps/ISO-8859-1.gz ] &&
    return 0
  pkg_install locales || return 1
  [ -e /usr/share/i18n/locales/en_US ] && return 0
  PG_ENV_ERROR="Debian's locales package installed no /usr/share/i18n/locales/en_US"
  return 1
}

# The package tests (tests/integration/test_package.py) build a .deb with dpkg-deb, install it
# with dpkg --root into a root they make (ldd, chroot, unshare, mount: libc-bin, coreutils,
# util-linux, mount), look up its man pages with man-db's man, and check its systemd units
# with systemd-analyze.
packaging_ensure() {
  local tool missing_pkgs=()
  for tool in dpkg-deb ldd chroot unshare mount; do
    if ! sbin_which "$tool" >/dev/null; then
      PG_ENV_ERROR="$tool is missing (Debian's dpkg, libc-bin, coreutils, util-linux, mount)"
      return 1
    fi
  done
  command -v man >/dev/null || missing_pkgs+=(man-db)
  command -v systemd-analyze >/dev/null || missing_pkgs+=(systemd)
  [ ${#missing_pkgs[@]} -eq 0 ] || pkg_install "${missing_pkgs[@]}" || return 1
  command -v man >/dev/null && return 0
  PG_ENV_ERROR="Debian's man-db package installed no man executable"
  return 1
}
