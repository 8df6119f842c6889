#!/usr/bin/env bash
# Set up (first time) and run the main study: experiments/quickstart.yaml.
# Results (Parquet records, figures, summaries) go to results/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/pubsim run experiments/quickstart.yaml --out "${OUT:-results/quickstart}" "$@"
