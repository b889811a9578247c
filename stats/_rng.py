"""Turning a user's ``seed`` into the integer seed numba's generator takes."""

from __future__ import annotations

import numpy as np

SeedLike = int | np.random.Generator | np.random.SeedSequence | None


def kernel_seed(seed: SeedLike) -> int:
    """A 32-bit seed for a numba kernel; ``None`` draws fresh OS entropy."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(0, 2**32 - 1))
    return int(np.random.default_rng(seed).integers(0, 2**32 - 1))
