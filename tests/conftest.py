"""Test-session settings shared by every folder.

User presets (``$PUBSIM_PRESETS``, else ``~/.config/pubsim/presets``) shadow
built-in ones, so the tests point that folder at an empty temporary one: a
developer's own presets never change what the tests see (subprocesses
inherit it too).
"""

from __future__ import annotations

import os
import tempfile


def pytest_configure(config):
    os.environ["PUBSIM_PRESETS"] = tempfile.mkdtemp(prefix="pubsim-test-presets-")


#: Tests that measure real brokers or this machine: they run alone, after the others
#: (scripts/test.sh), so that no other test competes for the cores they measure.
SERIAL_PATHS = ("tests/harness/", "tests/calibration/test_smoke_measure.py")


def pytest_collection_modifyitems(config, items):
    import pytest

    root = config.rootpath
    for item in items:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        if path.startswith(SERIAL_PATHS):
            item.add_marker(pytest.mark.serial)
