"""The notebooks run top to bottom through a real Jupyter kernel (nbclient), in quick mode.

Each notebook is executed by an IPython kernel as a user's JupyterLab would
run it (inline matplotlib backend, the kernel's own process and working
directory ``notebooks/``), then its checks (:mod:`tests.app.notebook_checks`)
run in the same kernel on the variables it left behind. A notebook that
draws must have image output: a library that selected a non-interactive
backend, or closed its figures, would leave the notebook without figures.
"""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

from tests import ROOT
from tests.app.notebook_checks import CHECKS

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_every_notebook_is_checked_and_has_no_outputs():
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text())["cells"]
        assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), path.name
        assert path.name in CHECKS or path.name == "saturation_what_if.ipynb", path.name


def _images(cell):
    return sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel_and_shows_its_figures(path, monkeypatch):
    monkeypatch.setenv("PUBSIM_NOTEBOOK_QUICK", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's own default (inline)
    nb = nbformat.read(path, as_version=4)
    n_cells = len(nb.cells)
    check = [f"import sys; sys.path.insert(0, {str(ROOT)!r})", "from tests.app.notebook_checks import CHECKS"]
    if path.name in CHECKS:
        check.append(f"CHECKS[{path.name!r}](globals())")
    if path.name == "saturation_what_if.ipynb":
        check.append(
            "low, high = sweep.iloc[0], sweep.iloc[-1]\n"
            "assert low['loss_rate'] == 0 and high['loss_rate'] > 0.05\n"
            "assert low['sustainability'] > 0.99 > high['sustainability']"
        )
    nb.cells.append(nbformat.v4.new_code_cell("\n".join(check)))
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    images = sum(_images(c) for c in nb.cells[:n_cells])
    assert images > 0, f"{path.name} drew no figure in the kernel"


def test_every_notebook_is_a_tutorial_page_with_a_note_on_how_to_run_it(tmp_path):
    """scripts/tutorials.py (run by scripts/docs.sh) copies each notebook with one note cell; mkdocs.yml lists them."""
    subprocess.run([sys.executable, str(ROOT / "scripts" / "tutorials.py"), str(tmp_path)], check=True)
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    (tutorials,) = [entry["Tutorials"] for entry in nav if "Tutorials" in entry]
    pages = {page for entry in tutorials for page in entry.values()}
    assert {p.name for p in tmp_path.glob("*.ipynb")} == {p.name for p in NOTEBOOKS}
    for path in NOTEBOOKS:
        assert f"tutorials/{path.name}" in pages, path.name
        original, page = (nbformat.read(p, as_version=4) for p in (path, tmp_path / path.name))
        note = page.cells.pop(1)
        assert note.cell_type == "markdown" and f"notebooks/{path.name}" in note.source and "progress" in note.source
        assert page == original
        nbformat.validate(page)
