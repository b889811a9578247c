"""A set of millions of ids in 16 bytes each: their 128-bit digests, most of them in sorted numpy arrays.

Why not a ``set`` of the strings: the audit checks every trace id of its input for a repeat, and at a million
ids the strings and the set's slots held ~125 MiB, the largest thing in the process. Here an id is its
BLAKE2b digest (16 bytes; two different ids share one with probability about n² / 2¹²⁹, 10⁻²⁷ at a million,
so a repeat found is a repeat); the digests of the last few thousand ids wait in a small ``set`` and are
merged into the sorted arrays once they reach an eighth of them, so the merges cost O(n log n) in all.
The digests are made where the ids are read (``digests``: a worker process, in the audit), and only their
bytes cross to the process that holds the set.
"""

from __future__ import annotations

from collections.abc import Iterable
from hashlib import blake2b

import numpy as np

DIGEST_BYTES = 16
#: digests kept in the small set before a merge, at least
_MIN_RECENT = 1 << 16


def digests(ids: Iterable[str]) -> bytes:
    """The 16-byte digest of each id, concatenated (what ``IdSet.add`` takes)."""
    return b"".join(blake2b(i.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest() for i in ids)


class IdSet:
    """Ids added in batches of digests; ``add`` says which were in already."""

    def __init__(self) -> None:
        # the merged digests as two uint64 halves, sorted by (hi, lo)
        self._hi = np.empty(0, np.uint64)
        self._lo = np.empty(0, np.uint64)
        self._recent: set[bytes] = set()

    def __len__(self) -> int:
        return self._hi.size + len(self._recent)

    def add(self, batch: bytes) -> list[int]:
        """Add each digest of ``batch`` (``digests``' output) in order; the positions of those that were in
        already, before this call or earlier in it."""
        halves = np.frombuffer(batch, np.uint64).reshape(-1, 2)
        known = np.zeros(len(halves), bool)
        if self._hi.size:
            hi, lo = halves[:, 0], halves[:, 1]
            at = np.searchsorted(self._hi, hi)
            maybe = np.flatnonzero(at < self._hi.size)
            maybe = maybe[self._hi[at[maybe]] == hi[maybe]]
            for i in maybe:  # a repeat, almost surely: its first half's run holds its second half, or not
                j = int(at[i])
                while j < self._hi.size and self._hi[j] == hi[i] and not known[i]:
                    known[i] = self._lo[j] == lo[i]
                    j += 1
        repeats: list[int] = []
        recent = self._recent
        for i in range(len(halves)):
            digest = batch[i * DIGEST_BYTES:(i + 1) * DIGEST_BYTES]
            if known[i] or digest in recent:
                repeats.append(i)
            else:
                recent.add(digest)
        if len(recent) >= max(self._hi.size >> 3, _MIN_RECENT):
            self._merge()
        return repeats

    def _merge(self) -> None:
        new = np.frombuffer(b"".join(self._recent), np.uint64).reshape(-1, 2)
        self._recent = set()
        hi, lo = np.concatenate([self._hi, new[:, 0]]), np.concatenate([self._lo, new[:, 1]])
        order = np.lexsort((lo, hi))
        self._hi, self._lo = hi[order], lo[order]
