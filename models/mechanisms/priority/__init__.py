"""Priority channels and per-subscriber queue policies."""
