"""The lookahead closure the fast path uses to bound arrivals inside cycles."""

import math

import numpy as np

from pubsim.sim.drivers import _lookahead_closure


def test_closure_matches_hand_computed_least_paths():
    # edges s -> u weigh look[s]; 3 feeds the cycle 0 -> 1 -> 2 -> 0 (and 1 -> 0) from outside
    look = [1.0, 2.0, 4.0, 8.0]
    d = _lookahead_closure(look, [(0, 1), (1, 2), (2, 0), (1, 0), (3, 0)])
    want = np.array(
        [
            [3.0, 1.0, 3.0, math.inf],  # 0->1->0 = 1 + 2; 0->1->2 = 1 + 2
            [2.0, 3.0, 2.0, math.inf],  # 1->0; 1->0->1; 1->2
            [4.0, 5.0, 7.0, math.inf],  # 2->0; 2->0->1; 2->0->1->2
            [8.0, 9.0, 11.0, math.inf],  # 3 is reached by no edge
        ]
    )
    np.testing.assert_array_equal(d, want)


def test_parallel_edges_keep_the_least():
    d = _lookahead_closure([0.5, 0.25], [(0, 1), (0, 1), (1, 0)])
    np.testing.assert_array_equal(d, [[0.75, 0.5], [0.25, 0.75]])
