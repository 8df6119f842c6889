#!/usr/bin/env bash
# Set up (first time), run the static checks, build the documentation, and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# real brokers for the harness tests and the CI smoke measurement (Debian, as root)
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    bash scripts/install_brokers.sh
fi
bash scripts/lint.sh     # ruff, import-linter contracts and cycles, mypy (kernel and parameters)
bash scripts/docs.sh     # the documentation site, warnings as errors
exec .venv/bin/python -m pytest "$@"
