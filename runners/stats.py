"""Per-test statistics, llama-bench style.

Each repetition gives one sample in tokens per second (``n_tokens / wall_s``).  The reported figure is the
mean of the per-sample rates (not ``n_tokens / mean(wall_s)``) and its spread is the sample standard deviation
with n-1 in the denominator (0 for a single sample), as llama-bench's ``avg_ts`` / ``stddev_ts``.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def rate_tok_s(n_tokens: int, wall_s: float) -> float:
    """Tokens per second of one sample; raises ValueError for a non-positive wall time."""
    if wall_s <= 0:
        raise ValueError(f"wall time must be > 0 s, got {wall_s!r}")
    return n_tokens / wall_s


def mean(samples: Sequence[float]) -> float:
    """Arithmetic mean; raises ValueError on an empty sequence."""
    if not samples:
        raise ValueError("no samples")
    return statistics.fmean(samples)


def sample_stdev(samples: Sequence[float]) -> float:
    """Sample standard deviation (n-1); 0.0 for fewer than two samples."""
    if len(samples) < 2:
        return 0.0
    return statistics.stdev(samples)


def summarize(samples: Sequence[float]) -> tuple[float, float]:
    """(mean, sample stdev) of per-repetition rates."""
    return mean(samples), sample_stdev(samples)
