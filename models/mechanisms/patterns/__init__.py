"""Messaging patterns on top of pub/sub: push/pull, request/reply, polling, their reports."""
