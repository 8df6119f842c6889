"""Brokerless ZeroMQ PUB/SUB and PUSH/PULL: socket stations and peer pipes."""
