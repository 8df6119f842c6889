"""Fuzzing the inputs a user hands pubsim: scenario, study, GraphML and trace files.

``seeds`` makes the valid inputs (the project's own files, shrunk),
``mutate`` changes one place of each and says whether the result must be
refused, ``cases`` turns a (kind, number) into files and a ``pubsim`` command
line, ``server`` and ``sandbox`` run each case in a forked child under a time
and memory budget and judge it. ``test_fuzz`` runs a fixed budget in CI;
``python -m tests.fuzz --cases 2000`` runs the long profile and prints the
table of verdicts; ``corpus/`` keeps the cases that once failed.
"""
