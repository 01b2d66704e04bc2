"""Sums and counts per integer code (a call name, a category) without pandas: the summary's tables.

``sum_count`` gives what ``df.groupby(label)[value].agg(["sum", "count"]).sort_values("sum",
ascending=False)`` gives, from codes and their labels, a chunk of rows at a time.
"""

from __future__ import annotations

import numpy as np

from engine.analysis.tables import UNION_CHUNK, pandas_order


def median(values: np.ndarray) -> float:
    """``float(np.median(values))`` of a non-empty 1-D array without NaN, the same float.

    A partition and the middle value (or the mean of the two middle ones, added then halved as
    ``np.mean`` does); ``np.median`` of floats imports ``numpy.ma`` on its first call (~10 ms of a
    command's start-up).
    """
    v = np.asarray(values)
    n = len(v)
    if n % 2:
        return float(np.partition(v, n // 2)[n // 2])
    part = np.partition(v, [n // 2 - 1, n // 2])
    return float(np.add(part[n // 2 - 1], part[n // 2], dtype=np.float64) / 2.0)


def int_sums(codes: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per code 0..k-1 (float sums are exact below 2**53)."""
    if len(values) and int(np.abs(values).sum(dtype=np.float64)) < 2**53:
        return np.bincount(codes, weights=values, minlength=k).astype(np.int64)
    return np.array([int(values[codes == j].sum()) for j in range(k)], dtype=np.int64)


def sum_count(codes: np.ndarray, values: np.ndarray, labels: tuple[str, ...] | list[str],
              mask: np.ndarray | None = None) -> list[tuple[str, int, int]]:
    """(label, sum, count) per label of ``codes`` (-1: no label), the largest sum first.

    Only the rows where ``mask`` holds, when given. The rows and their order are what
    ``df.groupby(label)[value].agg(["sum", "count"]).sort_values("sum", ascending=False)`` gives:
    labels sorted as groupby sorts them, then pandas' sort of the sums (its ties kept alike).
    """
    sums, counts = code_sums(codes, values, len(labels), mask)
    return label_rows(sums, counts, labels)


def code_sums(codes: np.ndarray, values: np.ndarray, k: int, mask: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """(sum, count) of ``values`` per code 0..k-1 (rows with code -1, or outside ``mask``, left out)."""
    counts = np.zeros(k, dtype=np.int64)
    sums = np.zeros(k, dtype=np.int64)
    for lo in range(0, len(codes), UNION_CHUNK):  # a chunk at a time: no full-length temporaries
        c, v = codes[lo:lo + UNION_CHUNK], values[lo:lo + UNION_CHUNK]
        keep = c >= 0
        if mask is not None:
            keep &= mask[lo:lo + UNION_CHUNK]
        if not keep.all():
            c, v = c[keep], v[keep]
        counts += np.bincount(c, minlength=k)
        sums += int_sums(c, v, k)
    return sums, counts


def label_rows(sums: np.ndarray, counts: np.ndarray, labels: tuple[str, ...] | list[str]
                ) -> list[tuple[str, int, int]]:
    """:func:`sum_count`'s rows from per-code sums and counts (codes without rows left out)."""
    agg: dict[str, list[int]] = {}
    for j in np.flatnonzero(counts):
        s0, n0 = agg.get(labels[j], [0, 0])
        agg[labels[j]] = [s0 + int(sums[j]), n0 + int(counts[j])]
    keys = sorted(agg)
    order = pandas_order(np.array([agg[x][0] for x in keys], dtype=np.int64), ascending=False)
    return [(keys[i], agg[keys[i]][0], agg[keys[i]][1]) for i in order.tolist()]


def masked_sum(values: np.ndarray, mask: np.ndarray) -> int:
    """int(values[mask].sum()), a chunk at a time."""
    return sum(int(values[lo:lo + UNION_CHUNK][mask[lo:lo + UNION_CHUNK]].sum())
               for lo in range(0, len(values), UNION_CHUNK))
