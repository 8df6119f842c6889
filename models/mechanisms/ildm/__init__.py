"""Cooperating edge brokers (ILDM): control plane, relays, bridges, traffic accounting."""
