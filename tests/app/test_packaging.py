"""Packaging: one import name (pubsim), its layout, and environment.yml agreeing with setup.cfg."""

from __future__ import annotations

import configparser
import importlib.metadata
import os
import re
import subprocess
import sys
import zipfile

import pytest
import yaml

from tests import ROOT


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
    deps = [d.split("#")[0] for d in env["dependencies"] if isinstance(d, str) and not d.startswith(("python", "pip"))]
    # conda-forge's matplotlib-base is PyPI's matplotlib without the Qt backend
    return {("matplotlib" if n == "matplotlib-base" else n): v for n, v in map(_name_spec, deps)}


def test_environment_yml_matches_setup_cfg():
    assert _environment_yml() == _setup_cfg()


def test_python_version_agrees():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    py = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python"))
    assert cfg["options"]["python_requires"] == ">=" + py.split("=")[1]


# --- one import name: pubsim ------------------------------------------------


def _readme_snippet():
    """The Python block of README.md's "Using it from Python" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Using it from Python", 1)[1]
    return section.split("```python", 1)[1].split("```", 1)[0]


def _run_python(code, cwd, timeout=300):
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_every_package_folder_is_listed_in_setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = set(cfg["options"]["packages"].split())
    mapping = dict(line.replace(" ", "").split("=") for line in cfg["options"]["package_dir"].strip().splitlines())
    found = set()
    for name, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found == listed


def test_readme_snippet_runs_beside_user_folders_named_like_ours(tmp_path):
    """A user's own models/, sim/ and calibration/ beside a notebook neither break nor replace pubsim's."""
    for pkg in ("models", "sim", "calibration"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "models" / "broker.py").write_text("raise RuntimeError('the user module was imported')\n")
    code = _readme_snippet().replace("duration_s=60", "duration_s=2").replace("warmup_s=5", "warmup_s=0.5")
    code += "\nimport models; assert models.MINE\nprint('ok', r.summary()['published'])\n"
    proc = _run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")


def test_nothing_but_pubsim_is_installed_at_top_level(tmp_path):
    code = (
        "import importlib.util as u\n"
        "print([n for n in ('sim', 'models', 'calibration') if u.find_spec(n) is not None])\n"
        "import pubsim, pubsim.sim, pubsim.models, pubsim.calibration\n"
        "print(pubsim.__version__)"
    )
    proc = _run_python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    found, version = proc.stdout.split("\n")[:2]
    assert found == "[]"
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)


def test_curated_api_names_exist():
    import pubsim

    missing = [n for n in pubsim.__all__ if not hasattr(pubsim, n)]
    assert not missing
    assert {"simulate", "load_scenario", "RunResult", "star", "BrokerParams", "Exponential"} <= set(pubsim.__all__)


def test_version_flag():
    proc = subprocess.run([sys.executable, "-m", "pubsim", "--version"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"pubsim {importlib.metadata.version('pubsim')}"


@pytest.mark.slow
def test_wheel_install_runs_a_scenario_with_presets(tmp_path):
    """`pip install .` (a wheel, not editable) into a scratch venv: `pubsim run` finds its presets."""
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("pubsim-*.whl")
    with zipfile.ZipFile(wheel) as zf:  # package data beside the presets: the harness's C microbenchmark
        assert "pubsim/calibration/harness/native/syscall_costs.c" in zf.namelist()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # reuse this environment's dependencies (no network needed), but not its editable pubsim
    site = next((venv / "lib").glob("python3*/site-packages"))
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "deps.pth").write_text("\n".join(deps) + "\n")
    inst = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert inst.returncode == 0, inst.stderr[-2000:]
    scenario = (ROOT / "experiments" / "quickstart.yaml").read_text().replace("duration: 12s", "duration: 3s")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "quick.yaml").write_text(scenario)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "COLUMNS": "200"}
    proc = subprocess.run(
        [str(venv / "bin" / "pubsim"), "run", "quick.yaml"],
        cwd=tmp_path / "run",
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "PLACEHOLDER, NOT CALIBRATED" in proc.stdout  # the broker preset was found, with its provenance
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import pubsim.models.presets as p; print(p.__file__)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert str(site) in where.stdout, where.stdout + where.stderr
