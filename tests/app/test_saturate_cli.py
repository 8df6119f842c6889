"""``pubsim saturate``: the §4 search from the command line on a tiny M/D/1 scenario."""

from __future__ import annotations

import re

import pytest

from pubsim.cli import main

# one broker, constant 1 ms per message: capacity 1000 msg/s; a 1 msg/s probe publisher kept
TINY = """\
name: tiny-md1
seed: 7
run:
  duration: 2s
  warmup: 0.5s
topology:
  builder: star
  protocol: none
  broker:
    ingress_cost_s: const(1ms)
    queue_messages: 200
  publishers:
    - name: "load{i}"
      count: 2
      topics: ["a"]
      rate_per_s: 100/s
    - name: probe
      topics: ["b"]
      arrival: constant
      rate_per_s: 1/s
  subscribers:
    - name: "s{i}"
      count: 2
      subscriptions: ["a"]
    - name: sp
      subscriptions: ["b"]
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return str(path)


def _limit(out):
    m = re.search(r"limit \(re-rated publishers\)\s*│\s*([\d,.]+) msg/s ± ([\d.]+) %", out)
    assert m, out
    return float(m.group(1).replace(",", "")), float(m.group(2))


def test_saturate_prints_limit_error_and_bottleneck(tiny, capsys):
    assert (
        main(
            [
                "saturate",
                tiny,
                "--rerate",
                "load*",
                "--start",
                "1ms",
                "--duration",
                "2.5s",
                "--warmup",
                "0.5s",
                "--steps",
                "10",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    limit, err_pct = _limit(out)
    assert abs(limit - 999) / 999 <= err_pct / 100 + 0.01
    assert "others kept at 1.0 msg/s" in out
    assert re.search(r"bottleneck\s*│\s*broker", out)
    assert "probes run" in out


def test_saturate_with_two_workers_prints_the_serial_limit(tiny, capsys):
    args = ["saturate", tiny, "--rerate", "load*", "--duration", "1s", "--warmup", "0.2s", "--steps", "10"]
    assert main(args) == 0
    serial = _limit(capsys.readouterr().out)
    assert main(args + ["--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "local process pool (2 workers)" in out
    assert _limit(out) == serial


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--rerate", "nosuch*"], "nosuch"),
        (["--duration", "two seconds"], "--duration"),
        (["--start", "0s"], "--start"),
        (["--workers", "0"], "--workers"),
    ],
)
def test_saturate_bad_input_is_one_line_status_2(tiny, capsys, extra, needle):
    assert main(["saturate", tiny, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("pubsim: error:") and needle in err[0], err
