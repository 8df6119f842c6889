#!/usr/bin/env bash
# Create .venv and install pubsim with its test dependencies, once.
# Re-installs only when setup.cfg or pyproject.toml change (stamp file).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "pubsim needs Python >= 3.11 (found: $("$PYTHON" --version 2>&1))" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$PYTHON" -m venv .venv 2>/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
            rm -rf .venv && "$PYTHON" -m venv .venv
        else
            echo "cannot create a virtual environment: install python3-venv" >&2
            exit 1
        fi
    fi
fi
stamp=.venv/.pubsim-installed
want=$(cat setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".[test,lint,docs]"
    echo "$want" > "$stamp"
fi
