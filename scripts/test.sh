#!/usr/bin/env bash
# Set up (first time), run the static checks, build the documentation, and run the whole test suite.
#
#   bash scripts/test.sh                  the whole suite, as CI runs it
#   bash scripts/test.sh tests/kernel -x  pytest with these arguments, in one process (no split)
#
# The whole suite runs in two passes: first every test not marked `serial` on
# all cores (pytest-xdist, one worker per core; PUBSIM_TEST_WORKERS sets the
# count), then the `serial` ones alone, one at a time: they measure real
# brokers and the machine (tests/conftest.py SERIAL_PATHS), and a test on
# the other core would be part of what they measure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# real brokers for the harness tests and the CI smoke measurement (Debian, as root)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    bash scripts/install_brokers.sh
fi
bash scripts/lint.sh     # ruff, import-linter contracts and cycles, mypy (kernel and parameters)
bash scripts/docs.sh     # the documentation site, warnings as errors
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest "$@"
fi
status=0
.venv/bin/python -m pytest -n "${PUBSIM_TEST_WORKERS:-auto}" --dist loadfile -m "not serial" || status=$?
serial=0
.venv/bin/python -m pytest -m serial || serial=$?
if [ "$status" != 0 ] || [ "$serial" != 0 ]; then
    echo "tests failed: parallel pass exit $status, serial pass exit $serial" >&2
    exit 1
fi
