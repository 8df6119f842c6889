"""Fuzzing in CI: generated bad input ends in one clean line or a valid run.

Each case is one mutation of a file the project ships (or writes itself),
run through the ``pubsim`` command in a forked child under a 20 s and
1.5 GB budget (:mod:`tests.fuzz.sandbox`). A case passes when it is
refused with exit status 2 and one short line, or runs when it may be
valid; it fails on a traceback, a hang, a memory blow-up, an unreadable
error, or nonsense accepted.

Hypothesis draws the case numbers. The CI profile (the default) is
derandomized with a fixed budget per kind, so CI sees the same cases every
time; ``PUBSIM_FUZZ_PROFILE=long`` draws new numbers and many more of them
(and keeps hypothesis' database of failures). The cases that once failed
are replayed from ``corpus/``.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.fuzz.budget import FUZZ_ENV
from tests.fuzz.cases import KINDS, load_case, make_case
from tests.fuzz.mutate import Mutation
from tests.fuzz.sandbox import ACCEPTABLE, Sandbox, judge

CORPUS = Path(__file__).with_name("corpus")
PROFILES = {
    # no shrinking: a case number has no smaller form worth searching for
    "ci": settings(
        max_examples=50,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    ),
    "long": settings(max_examples=400, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck)),
}
PROFILE = PROFILES[os.environ.get("PUBSIM_FUZZ_PROFILE", "ci")]


@pytest.fixture(scope="module")
def box():
    with Sandbox() as sandbox:
        yield sandbox


@pytest.mark.fuzz
@pytest.mark.parametrize("kind", KINDS)
def test_generated_input_is_refused_cleanly_or_runs(box, kind):
    @PROFILE
    @given(number=st.integers(min_value=0, max_value=2**31 - 1))
    def check(number):
        outcome = box.run(make_case(kind, number, env=FUZZ_ENV))
        assert outcome.verdict in ACCEPTABLE, outcome.explain()

    check()


def _corpus():
    return sorted(p for p in CORPUS.iterdir() if (p / "case.json").exists()) if CORPUS.exists() else []


@pytest.mark.fuzz
@pytest.mark.parametrize("folder", _corpus(), ids=lambda p: p.name)
def test_corpus_case_is_refused_cleanly_or_runs(box, folder):
    case = load_case(folder)
    outcome = box.run(case)
    assert outcome.verdict in ACCEPTABLE, outcome.explain()


def test_the_judge_fails_what_it_must():
    """The verdicts themselves: a traceback, a long message and accepted nonsense are findings."""
    may = dataclasses.replace(
        make_case("scenario", 0), mutation=Mutation(operator="pool", where="x", must_refuse=False)
    )
    must = dataclasses.replace(may, mutation=Mutation(operator="nan", where="x", must_refuse=True))
    refused = {"killed": None, "exit": 2}
    assert judge(may, refused, "pubsim: error: run.duration: 'x' is invalid: a duration\n") == "error"
    assert judge(must, refused, "pubsim: error: run.duration: 'x' is invalid: a duration\n") == "error"
    assert judge(may, refused, "pubsim: error: " + "x" * 5000) == "unreadable_error"
    assert judge(may, refused, "pubsim: error: a\nb\n") == "unreadable_error"
    assert judge(may, refused, "Traceback (most recent call last):\npubsim: error: x\n") == "traceback"
    assert judge(may, {"killed": None, "exit": 99}, "Traceback (most recent call last):\n") == "traceback"
    assert judge(may, {"killed": None, "exit": None}, "") == "traceback"  # a signal
    assert judge(may, {"killed": "time", "exit": None}, "") == "hang"
    assert judge(may, {"killed": "memory", "exit": None}, "") == "memory"
    assert judge(may, {"killed": None, "exit": 99}, "numpy.core._exceptions._ArrayMemoryError: ...") == "memory"
    assert judge(may, {"killed": None, "exit": 0}, "") == "valid"
    assert judge(must, {"killed": None, "exit": 0}, "") == "nonsense"
