"""The engine kernel (sim/) type-checks with the project's mypy configuration,
and imports its modules at the top of each file, not inside functions."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KERNEL = sorted((ROOT / "sim").glob("*.py"))
OPTIONAL_MARK = "optional heavy dependency"  # the comment that allows an import in a function


def _function_imports(path):
    """(line, text) of imports inside function bodies, unless marked optional."""
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines), filename=str(path))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                context = " ".join(lines[max(node.lineno - 3, 0):node.lineno])
                if OPTIONAL_MARK not in context:
                    found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


@pytest.mark.parametrize("path", KERNEL, ids=lambda p: p.name)
def test_no_imports_inside_functions(path):
    assert _function_imports(path) == []


def test_the_check_sees_a_function_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    import json\n    return json\n\n"
                   "def g():\n    # optional heavy dependency\n    import scipy\n")
    assert _function_imports(bad) == [(2, "import json")]


def test_kernel_passes_mypy(monkeypatch):
    api = pytest.importorskip("mypy.api")
    monkeypatch.chdir(ROOT)  # [tool.mypy] in pyproject.toml: files = ["sim"]
    out, err, status = api.run([])
    assert status == 0, out + err
