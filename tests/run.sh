#!/usr/bin/env bash
# The whole test suite on a fresh machine: a virtualenv with cronwrap and its test tools,
# a reachable PostgreSQL (started for the run if needed), then pytest. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${CRONWRAP_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[test]'
source tests/pg_env.sh
trap pg_stop_throwaway EXIT
if ! pg_ensure && [ "${CI:-}" = true ]; then
  echo "tests: CI=true needs PostgreSQL; refusing to skip its tests" >&2
  exit 1
fi
export PATH="$PWD/$venv/bin:$PATH"
"$venv/bin/python" -m pytest "$@"
