"""Token counts drawn from a tenant's length distribution."""

from __future__ import annotations

import numpy as np

from scenarios.spec import Distribution, Empirical, Fixed, LogNormal, Normal, Uniform


def sample_lengths(dist: Distribution, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` token counts from a length distribution, clipped to its bounds."""
    if isinstance(dist, Fixed):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, Uniform):
        values = rng.integers(dist.min, dist.max + 1, size=n)
    elif isinstance(dist, Normal):
        values = np.rint(rng.normal(dist.mean, dist.std, size=n))
    elif isinstance(dist, LogNormal):
        mu = np.log(dist.mean) - dist.sigma**2 / 2  # so that E[X] = mean
        values = np.rint(rng.lognormal(mu, dist.sigma, size=n))
    elif isinstance(dist, Empirical):
        values = rng.choice(np.asarray(dist.observed()), size=n)
    else:  # pragma: no cover - the union is closed
        raise TypeError(dist)
    return np.clip(values, dist.min, dist.max).astype(np.int64)
