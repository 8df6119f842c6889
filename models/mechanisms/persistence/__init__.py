"""Persistent messages: broker disks (group commit) and broker restarts."""
