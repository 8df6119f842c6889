"""The compiler: registry of mechanisms, :func:`build_network`, parameter table, feature table."""
