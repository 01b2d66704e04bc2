"""Sample statistics for benchmark timings: median, mean, CV and the 95 % confidence interval.

Pure Python (no numpy/scipy) so the numbers are easy to check by hand. The CI of the mean uses
Student's t distribution; its quantile is computed by inverting the t CDF, which is written with the
regularized incomplete beta function (continued fraction, as in Numerical Recipes §6.4).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom (``math.inf``: the normal)."""
    if math.isinf(df):
        return 0.5 * (1.0 + math.erf(t / math.sqrt(2.0)))
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (e.g. ``t_quantile(0.975, 4)`` = 2.776445).

    Args:
        p: Probability in (0, 1).
        df: Degrees of freedom (> 0), or ``math.inf`` for the standard normal.

    Raises:
        ValueError: p outside (0, 1) or df <= 0.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:  # bracket: the t CDF is increasing
        lo, hi = hi, hi * 2.0
    for _ in range(200):  # bisection to double precision
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def median(values: Sequence[float]) -> float:
    """The median (mean of the two middle values for an even count)."""
    if not values:
        raise ValueError("median of no values")
    s = sorted(values)
    n, mid = len(s), len(s) // 2
    return float(s[mid]) if n % 2 else (s[mid - 1] + s[mid]) / 2.0


@dataclass(frozen=True)
class SampleStats:
    """Statistics of one set of timings (same unit as the samples; ``cv`` is a ratio).

    ``stdev`` is the sample standard deviation (n - 1); the CI is mean ± t(0.975, n-1)·stdev/√n,
    and is NaN-free: with one sample the half-width is infinite.
    """

    n: int
    mean: float
    median: float
    stdev: float
    cv: float
    min: float
    max: float
    ci95_low: float
    ci95_high: float
    ci95_half_width: float

    @property
    def rel_ci95_half_width(self) -> float:
        """Half-width of the 95 % CI over the mean (inf when the mean is 0 or n < 2)."""
        return self.ci95_half_width / self.mean if self.mean else math.inf

    def as_dict(self) -> dict[str, Any]:
        """Field name → value, plus ``rel_ci95_half_width``."""
        d = asdict(self)
        d["rel_ci95_half_width"] = self.rel_ci95_half_width
        return d


def summarize(samples: Sequence[float], confidence: float = 0.95) -> SampleStats:
    """Median, mean, sample stdev, CV, min, max and the CI of the mean.

    Args:
        samples: At least one value.
        confidence: Two-sided confidence level of the interval (0.95 gives the 95 % CI).

    Raises:
        ValueError: no samples.
    """
    n = len(samples)
    if n == 0:
        raise ValueError("no samples to summarize")
    mean = math.fsum(samples) / n
    if n > 1:
        var = math.fsum((x - mean) ** 2 for x in samples) / (n - 1)
        sd = math.sqrt(var)
        half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    else:
        sd, half = 0.0, math.inf
    return SampleStats(
        n=n, mean=mean, median=median(samples), stdev=sd, cv=sd / mean if mean else math.nan,
        min=float(min(samples)), max=float(max(samples)),
        ci95_low=mean - half, ci95_high=mean + half, ci95_half_width=half,
    )
