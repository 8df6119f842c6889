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
