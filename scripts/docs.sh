#!/usr/bin/env bash
# Build the documentation site into build/site (warnings are errors):
# the scenario reference and JSON Schema are generated from the parameter
# classes, the API reference from the docstrings (on the installed layout),
# the tutorials from notebooks/ (shown as they are committed, not executed).
set -euo pipefail
export NO_MKDOCS_2_WARNING=1  # Material prints an MkDocs 2.0 notice otherwise
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh >/dev/null
rm -rf build/layout && .venv/bin/python scripts/layout_view.py build/layout
.venv/bin/python -m pubsim.reference docs/reference
.venv/bin/python -m pubsim.calibration.evidence docs/reference
.venv/bin/python scripts/tutorials.py docs/tutorials
.venv/bin/mkdocs build --strict --quiet
cp docs/reference/scenario.schema.json build/site/scenario.schema.json
cp docs/reference/evidence.schema.json build/site/evidence.schema.json
echo "documentation: build/site/index.html"
