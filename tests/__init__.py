"""pubsim's tests, in folders that mirror the packages.

kernel/ (engine), model/ (parameters, topology, presets), mechanisms/<name>/,
loads/, calibration/, harness/ (real brokers), study/ (sweeps, analysis,
report), app/ (CLI, packaging, notebooks), and oracles/: the checks against
an independent truth (queueing theory, hand-computed timelines, agreement of
the two drivers, properties, bad input), and fuzz/ (generated bad input run
through the pubsim command in a sandbox; see its package docstring). Shared builders and hypothesis
strategies live in :mod:`pubsim.testing`.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository
