#!/usr/bin/env bash
# Static checks (run by scripts/test.sh before the tests, so by CI):
#   ruff (lint and format) over the whole tree; import-linter's layer contract
#   and a module-level import-cycle check; mypy on the kernel and the parameters.
# import-linter and mypy read the installed layout (pubsim/sim/..., see
# scripts/layout_view.py), not the repository's top-level folders.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >/dev/null
root=$PWD
bin=$root/.venv/bin
echo "== ruff check"; "$bin/ruff" check .
echo "== ruff format --check"; "$bin/ruff" format --check .
view=$(mktemp -d)
trap 'rm -rf "$view"' EXIT
"$bin/python" scripts/layout_view.py "$view"
cd "$view"
echo "== lint-imports"; PYTHONPATH=$view "$bin/lint-imports" "$root/pyproject.toml" --no-cache --no-logo
echo "== import cycles"; PYTHONPATH=$view "$bin/python" "$root/scripts/import_cycles.py"
echo "== mypy"; "$bin/python" -m mypy --config-file "$root/pyproject.toml"
