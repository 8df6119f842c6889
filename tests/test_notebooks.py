"""The notebooks run top to bottom (their code cells, in quick mode, without Jupyter)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("PUBSIM_NOTEBOOK_QUICK", "1")
    monkeypatch.chdir(path.parent)
    cells = json.loads(path.read_text())["cells"]
    namespace = {}
    for cell in cells:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), f"{path.name}", "exec"), namespace)
    if "sweep" in namespace:
        sweep = namespace["sweep"]
        low, high = sweep.iloc[0], sweep.iloc[-1]
        assert low["loss_rate"] == 0 and high["loss_rate"] > 0.05
        assert low["sustainability"] > 0.99 > high["sustainability"]
