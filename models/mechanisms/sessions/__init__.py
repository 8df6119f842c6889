"""Subscriber sessions (churn, clean sessions), retained messages, publisher outages and Will messages."""
