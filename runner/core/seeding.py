"""Stable identities and stateless randomness.

Every random choice in trialgrid is a pure function of a seed and a salt, so a trial
re-run anywhere (another process, a Ray worker, behind ``trialgrid serve``) makes the
same choices, and adding a new decision (a new salt) never shifts existing ones.
"""

from __future__ import annotations

import hashlib
import math

_MASK = (1 << 64) - 1
#: between the parts ``stable_hash`` hashes
SEP = "\x1f"


def stable_hash(*parts: object, digest_size: int = 8, person: bytes = b"") -> bytes:
    return hashlib.blake2b(SEP.join(map(str, parts)).encode(), digest_size=digest_size, person=person).digest()


def stable_int(*parts: object, person: bytes = b"") -> int:
    """A 63-bit non-negative integer (fits an int64 column) from ``parts``."""
    return int.from_bytes(stable_hash(*parts, person=person), "little") >> 1


def uniform(seed: int, salt: int) -> float:
    """A uniform in [0, 1) from (seed, salt), no RNG state."""
    return (mix64(seed, salt) >> 11) * (1.0 / (1 << 53))


def mix64(seed: int, salt: int) -> int:
    """64 random bits from (seed, salt): the splitmix64 finaliser."""
    z = (seed + 0x9E3779B97F4A7C15 * (salt + 1)) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


#: 64-bit words of randomness a permutation of n draws, per n (a catalogue's few sizes)
_WORDS: dict[int, int] = {}


def permutation(n: int, seed: int, salt: int) -> list[int]:
    """A Fisher–Yates permutation of ``range(n)`` drawn from (seed, salt).

    The swap indices are the mixed-radix digits of one big random integer with at
    least 64 bits more than log2(n!), so every permutation is equally likely up to a
    bias below 2^-64, at one splitmix call per 64 bits instead of one per swap.
    """
    words = _WORDS.get(n)
    if words is None:
        words = _WORDS[n] = int((math.lgamma(n + 1) / math.log(2) + 64) // 64 + 1)
    r = 0
    for w in range(words):
        r = (r << 64) | mix64(seed, salt + w)
    order = list(range(n))
    for i in range(n - 1, 0, -1):
        r, j = divmod(r, i + 1)
        order[i], order[j] = order[j], order[i]
    return order
