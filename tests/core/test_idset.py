"""The id set the audit checks repeats with: the same answers as a ``set`` of the strings, across merges."""

from __future__ import annotations

import random

import numpy as np

from runner.core import idset
from runner.core.idset import IdSet, digests


def test_repeats_are_found_before_and_after_merges_and_within_a_batch() -> None:
    rng = random.Random(5)
    ids = [f"t-{rng.randrange(300_000)}" for _ in range(400_000)]  # about a quarter repeat, near and far
    plain: set[str] = set()
    kept = IdSet()
    found: list[bool] = []
    want: list[bool] = []
    for start in range(0, len(ids), 4_096):
        batch = ids[start:start + 4_096]
        repeats = set(kept.add(digests(batch)))
        found += [i in repeats for i in range(len(batch))]
        for i in batch:
            want.append(i in plain)
            plain.add(i)
    assert found == want and sum(want) > 100_000
    assert len(kept) == len(plain)
    assert kept._hi.size > idset._MIN_RECENT  # the test crossed merges


def test_ids_that_share_the_first_half_of_a_digest_are_told_apart() -> None:
    kept = IdSet()
    a, b = np.array([[7, 1]], np.uint64).tobytes(), np.array([[7, 2]], np.uint64).tobytes()
    assert kept.add(a) == []
    kept._merge()
    assert kept.add(b) == [] and kept.add(a + b) == [0, 1]
    kept._merge()
    assert kept.add(np.array([[7, 3], [7, 2]], np.uint64).tobytes()) == [1]


def test_empty_and_odd_ids() -> None:
    kept = IdSet()
    assert kept.add(digests([])) == []
    assert kept.add(digests(["", "\ud800", "é", "e\u0301"])) == []
    assert kept.add(digests(["é", "x", ""])) == [0, 2]
