"""Mechanisms as plug-ins, one subpackage each, and the plug-in interface they share.

Interface (imported by every mechanism): :mod:`.base` (the ``Mechanism``
protocol and its hooks), :mod:`.keys` (``StationKind``, ``StationKey``),
:mod:`.context` (``CompileContext``). Plug-ins: :mod:`.core` (uplinks,
brokers, downlinks, subscribers), :mod:`.ildm`, :mod:`.brokerless`,
:mod:`.persistence`, :mod:`.serialization`, :mod:`.qos`, :mod:`.sessions`,
:mod:`.priority`; :mod:`.patterns` has no compile hooks (reports built on
the records). The registry that orders them is
:data:`pubsim.models.assembly.registry.MECHANISMS`; see ``docs/architecture.md``.
"""
