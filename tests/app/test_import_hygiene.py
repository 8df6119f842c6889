"""Every package imports its modules at the top of each file, not inside
functions (an optional heavy dependency may be imported where it is used,
said in a comment). mypy, ruff and import-linter run in scripts/lint.sh."""

from __future__ import annotations

import ast

import pytest

from tests import ROOT

PACKAGES = ("sim", "models", "pubsim", "calibration")
SOURCES = sorted(p for d in PACKAGES for p in (ROOT / d).rglob("*.py"))
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
                context = " ".join(lines[max(node.lineno - 3, 0) : node.lineno])
                if OPTIONAL_MARK not in context:
                    found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_imports_inside_functions(path):
    assert _function_imports(path) == []


def test_the_check_sees_a_function_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f():\n    import json\n    return json\n\ndef g():\n    # optional heavy dependency\n    import scipy\n"
    )
    assert _function_imports(bad) == [(2, "import json")]
