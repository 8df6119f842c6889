"""Analysis of simulation studies: the virtual benchmark and study figures.

:func:`saturation_search` runs the interval search of SYSTEMS.md §4 on the
simulator; :func:`knees` finds where a load sweep stops being sustainable;
:mod:`pubsim.analysis.figures` draws study results as matplotlib Figures.
"""

from __future__ import annotations

from .saturation import Saturation, knees, rerated_publishers, saturation_search, with_publisher_rate

__all__ = ["Saturation", "saturation_search", "with_publisher_rate", "rerated_publishers", "knees"]
