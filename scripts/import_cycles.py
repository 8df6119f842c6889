"""Fail if the module import graph of ``pubsim`` has a cycle (module level).

Run on the installed layout (see scripts/layout_view.py), with that folder
first on ``sys.path``. Prints each cycle found, exits 1 if any.
"""

from __future__ import annotations

import sys

import grimp
import networkx as nx


def main() -> int:
    graph = grimp.build_graph("pubsim")
    g = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            g.add_edge(module, imported)
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    for c in cycles:
        print("import cycle:", " <-> ".join(c))
    print(f"{g.number_of_nodes()} modules, {g.number_of_edges()} imports, {len(cycles)} cycles")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
