"""progress=True shows a tqdm bar on stderr (no Jupyter here: text), never on stdout; off by default."""

from __future__ import annotations

import pytest

from pubsim import progress as P
from pubsim.analysis import saturation_search
from pubsim.run import simulate
from pubsim.sim.distributions import Constant
from pubsim.sim.errors import ConfigError
from pubsim.study import parse_study, run_study
from pubsim.testing import single_queue
from tests.study.study_cases import study_dict


def _queue():
    return single_queue(rate_per_s=200.0, service=Constant(value=1e-3))


def test_run_study_with_progress_draws_a_bar_of_tasks_on_stderr(tmp_path, capsys):
    study = parse_study(study_dict(replications=2))
    df = run_study(study, tmp_path / "out", executor="serial", progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "study tiny-study" in err and "2/2" in err and "task" in err
    assert len(df) == 2


def test_run_study_is_quiet_by_default_and_a_resumed_bar_starts_at_the_finished_tasks(tmp_path, capsys):
    study = parse_study(study_dict(replications=2))
    run_study(study, tmp_path / "out", executor="serial")
    assert capsys.readouterr() == ("", "")
    run_study(study, tmp_path / "out", executor="serial", progress="again")
    out, err = capsys.readouterr()
    assert out == "" and "again" in err and "2/2" in err


def test_simulate_with_progress_shows_simulated_seconds_and_changes_no_result(capsys):
    quiet = simulate(_queue(), duration_s=1.0, warmup_s=0.2, seed=4).summary()
    assert capsys.readouterr() == ("", "")
    shown = simulate(_queue(), duration_s=1.0, warmup_s=0.2, seed=4, progress=True).summary()
    out, err = capsys.readouterr()
    assert out == "" and "simulating" in err and "100%" in err
    assert shown == quiet


def test_a_callable_progress_is_still_called_with_the_raw_values():
    calls = []
    simulate(_queue(), duration_s=1.0, progress=lambda done_s, total_s: calls.append((done_s, total_s)))
    assert calls and calls[-1] == (1.0, 1.0)


def test_saturation_search_with_progress_counts_its_probes(capsys):
    s = saturation_search(_queue(), start_interval_s=0.5e-3, duration_s=0.5, warmup_s=0.1, steps=4, progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "saturation search" in err and f"{len(s.probes)}probe" in err.replace(" ", "")
    last = s.probes.iloc[-1]  # the bar's label is the last probe's interval and verdict
    verdict = "sustainable" if last["sustainable"] else "unsustainable"
    assert f"{last['interval_s'] * 1e3:.4g} ms {verdict}" in err


def test_a_bad_argument_still_raises_one_config_error_with_a_bar_asked_for(capsys):
    with pytest.raises(ConfigError, match="nosuch"):
        saturation_search(_queue(), rerate=["nosuch*"], progress=True)
    assert capsys.readouterr().out == ""


def test_steps_shows_done_of_total_and_the_label(capsys):
    with P.steps(True, desc="validating", unit="config") as cb:
        for i in range(3):
            cb(i + 1, 3, f"pair{i}")
    err = capsys.readouterr().err
    assert "validating" in err and "3/3" in err and "pair2" in err


def test_adapters_pass_callables_through_and_show_nothing_when_off(capsys):
    f = print
    for adapter, kw in ((P.seconds, {"total_s": 1.0}), (P.steps, {}), (P.counter, {})):
        with adapter(f, desc="x", **kw) as cb:
            assert cb is f
        for off in (None, False):
            with adapter(off, desc="x", **kw) as cb:
                assert cb is None
    assert capsys.readouterr() == ("", "")


def test_track_yields_every_item_with_a_bar_and_none_when_off(capsys):
    assert list(P.track(range(5), desc="runs")) == list(range(5))
    err = capsys.readouterr().err
    assert "runs" in err and "5/5" in err
    assert list(P.track(iter("abc"), progress=False)) == ["a", "b", "c"]
    assert capsys.readouterr() == ("", "")
