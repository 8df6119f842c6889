"""environment.yml and setup.cfg declare the same dependencies."""
from __future__ import annotations

import configparser
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name_spec(req):
    m = re.match(r"^\s*([A-Za-z0-9_.-]+)\s*(.*)$", req)
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def _setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    reqs = [r for r in cfg["options"]["install_requires"].splitlines() if r.strip()]
    extras = cfg["options.extras_require"]
    for key in extras:
        reqs += [r for r in extras[key].splitlines() if r.strip()]
    return dict(_name_spec(r) for r in reqs)


def _environment_yml():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = [d for d in env["dependencies"] if isinstance(d, str) and not d.startswith(("python", "pip"))]
    return dict(_name_spec(d) for d in deps)


def test_environment_yml_matches_setup_cfg():
    assert _environment_yml() == _setup_cfg()


def test_python_version_agrees():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert cfg["options"]["python_requires"] == ">=" + py.split("=")[1]
