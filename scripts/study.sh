#!/usr/bin/env bash
# Set up (first time), run the main study end to end and write its report:
#   experiments/studies/main.yaml  -> results/main/ (records, summaries, manifest)
#   a CampusIoT trace scaled up to a city, when ../shared/traces is present
#                                  -> results/main/trace/ (else a note saying it was skipped)
#   the report                     -> results/main/report.html and results/main/report.md
# OUT=DIR changes the results directory; PUBSIM_TRACES=DIR the traces directory;
# extra arguments go to `pubsim study run` (e.g. --workers 2). Re-running resumes the study.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
OUT=${OUT:-results/main}
.venv/bin/pubsim study run experiments/studies/main.yaml --out "$OUT" "$@"
.venv/bin/python -m pubsim.analysis.trace_study --traces "${PUBSIM_TRACES:-../shared/traces}" --out "$OUT/trace"
.venv/bin/pubsim report "$OUT" --html "$OUT/report.html" --md "$OUT/report.md"
echo "report: $OUT/report.html (and $OUT/report.md)"
