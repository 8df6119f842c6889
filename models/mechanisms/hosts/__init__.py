"""Hosts: machines that processes are placed on (issue 13).

A host (:class:`pubsim.models.params.host.HostParams`) has cores, a relative
CPU speed and one full-duplex network card. This mechanism adds the card: a
transmit and a receive FIFO per host (:mod:`.card`) that every connection
between processes on different hosts passes, and loopback connections between
processes of one host (:mod:`.plugin`); CPU costs divided by the host's
speed (:mod:`.speed`); the CPU a broker shares with its ILDM node on one host
(:mod:`.cpu`); what monitoring shows (:mod:`.monitor`). A topology without
hosts compiles to exactly the network it did before.
"""

from .card import RECEIVE, TRANSMIT, CardStation
from .plugin import HOSTS, Hosts, card_key, connection_ends, cpu_key

__all__ = ["HOSTS", "Hosts", "CardStation", "TRANSMIT", "RECEIVE", "card_key", "cpu_key", "connection_ends"]
