"""Copies written in turn: a broker that writes each copy as it routes it.

Plug-in: :data:`TURNS` (:mod:`.plugin`); switched on per broker by
``BrokerParams.copies_in_turn``; the lead of each copy :func:`.leads.copy_leads_s`.
"""

from .leads import copy_leads_s
from .plugin import TURNS

__all__ = ["TURNS", "copy_leads_s"]
