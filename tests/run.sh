#!/usr/bin/env bash
# The whole test suite on a fresh machine: a virtualenv with cronwrap and its test tools,
# a reachable PostgreSQL (installed and started for the run if need be), and PgBouncer, chromium and
# Prometheus (installed if missing; the tests start their own), then pytest. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CRONWRAP_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'
source tests/pg_env.sh
trap pg_stop_throwaway EXIT
# Without one, its tests are skipped; under CI=true the run fails instead, with one line.
missing() {
  if [ "${CI:-}" = true ]; then
    echo "tests: CI=true needs $1, refusing to skip its tests: $PG_ENV_ERROR" >&2
    exit 1
  fi
  echo "tests: $PG_ENV_ERROR; $1 tests will be skipped" >&2
}
pg_ensure || missing PostgreSQL
pgbouncer_ensure || missing PgBouncer
chromium_ensure || missing chromium
prometheus_ensure || missing Prometheus
locales_ensure || missing "ISO-8859-1 locale"
packaging_ensure || missing "package"
export PATH="$PWD/$venv/bin:$PATH"
# Three workers on two cores (pytest-xdist): most tests wait on processes, locks and clocks,
# not on a core (at a load average of 25-45 from other work, the suite took 33 min 47 s alone
# and 16 min 3 s in three workers).
# A file's tests run in one worker (--dist loadfile), so what a file's tests share (the package
# tests' one build in build/package, mypy's cache) is never made twice at once; xdist_group
# marks are not honoured with pytest 9 here. CRONWRAP_TEST_WORKERS=0: no workers.
"$venv/bin/python" -m pytest -n "${CRONWRAP_TEST_WORKERS:-3}" --dist loadfile "$@"
