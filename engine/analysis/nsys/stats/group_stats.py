"""Per-group statistics of durations or sizes, and the summary tables nsys prints from them.

Values are grouped by an integer code per row and summarised with numpy segment reductions
(): total, count, mean, median (mean of the two middle values for an even
count), min, max and sample standard deviation (0 for a single value), the formulas of
docs/FORMATS.md. :func:`time_rows` shapes groups as a time summary (``Time (%)`` of the sum of all
totals, rows by total descending, ties by label ascending), :func:`size_table` as a size summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import COLUMNS
from engine.analysis.nsys.stats.table import SummaryTable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: One group's (sum, count, mean, median, min, max, sample stddev).
Stats = tuple[int, int, float, float, int, int, float]
#: (label, stats) per group; a label may be a tuple (reports with several label columns).
Groups = list[tuple[Any, Stats]]


def segment_stats(
    codes: npt.NDArray[np.int64], values: npt.NDArray[np.int64], n_groups: int
) -> list[tuple[int, int, float, float, int, int, float]]:
    """Per group code 0..n_groups-1: (sum, count, mean, median, min, max, sample stddev).

    Values are sorted within their group with one sort: when the codes and the value range fit
    in 63 bits, of ``code * span + value`` (a plain int64 sort), else a lexsort. Sums are
    exact (int64); the mean is sum / count in doubles; an even count's median is the mean of the
    two middle values; the stddev is two-pass over doubles, 0 for a single value. A group with no
    values gets None.
    """
    import numpy as np

    if len(values) > _PER_GROUP_MIN_ROWS and n_groups <= _PER_GROUP_MAX_GROUPS:
        return _per_group_stats(codes, values, n_groups)
    counts = np.bincount(codes, minlength=n_groups)
    vmin, vmax = int(values.min()), int(values.max())
    span = vmax - vmin + 1
    if n_groups * span < 2**62 and max(-vmin, vmax) < 2**62:  # one int64 sort: group, then value
        key = codes.astype(np.int64) * span  # int32 codes: widen before multiplying
        key += values
        key.sort()
        base = np.repeat(np.arange(n_groups, dtype=np.int64) * span, counts)
        s_vals = key - base  # the values, sorted within each group
    else:  # pragma: no cover - needs durations of centuries or billions of names
        s_vals = values[np.lexsort((values, codes))]
    present = np.flatnonzero(counts)
    cnt = counts[present]
    ends = np.cumsum(counts)[present]
    starts = ends - cnt
    sums = np.add.reduceat(s_vals, starts)
    mean = sums / cnt  # int64 / int64: both as doubles, like the DataFrame path
    lo, hi = starts + (cnt - 1) // 2, starts + cnt // 2
    median = (s_vals[lo].astype(np.float64) + s_vals[hi].astype(np.float64)) / 2.0
    dev = s_vals.astype(np.float64)
    dev -= np.repeat(mean, cnt)
    dev *= dev
    ss = np.add.reduceat(dev, starts)
    std = np.sqrt(ss / np.maximum(cnt - 1, 1))
    std[cnt == 1] = 0.0
    out: list[Any] = [None] * n_groups
    rows = zip(present.tolist(), sums.tolist(), cnt.tolist(), mean.tolist(), median.tolist(),
               s_vals[starts].tolist(), s_vals[ends - 1].tolist(), std.tolist(), strict=True)
    for g, *stats in rows:
        out[g] = tuple(stats)
    return out


#: Above this many values and up to this many groups, each group is sorted on its own (bounded
#: memory on 10M-kernel reports: no whole-table sort key, one group's values at a time).
_PER_GROUP_MIN_ROWS = 4_000_000
_PER_GROUP_MAX_GROUPS = 48


def _per_group_stats(
    codes: npt.NDArray[np.int64], values: npt.NDArray[np.int64], n_groups: int
) -> list[tuple[int, int, float, float, int, int, float]]:
    """:func:`segment_stats` one group at a time, with the same arithmetic (same bytes out)."""
    import numpy as np

    out: list[Any] = [None] * n_groups
    for g in range(n_groups):
        v = values[codes == g]
        if not len(v):
            continue
        v.sort()
        cnt = len(v)
        total = int(np.add.reduceat(v, [0])[0])
        mean = float(np.float64(total) / np.float64(cnt))
        median = (float(v[(cnt - 1) // 2]) + float(v[cnt // 2])) / 2.0
        dev = v.astype(np.float64)
        del v
        vmin, vmax = int(dev[0]), int(dev[-1])
        dev -= mean
        dev *= dev
        std = 0.0 if cnt == 1 else float(np.sqrt(np.add.reduceat(dev, [0])[0] / max(cnt - 1, 1)))
        out[g] = (total, cnt, mean, median, vmin, vmax, std)
    return out


def grouped(
    labels: Sequence[str], codes: npt.NDArray[np.int64], values: npt.NDArray[np.int64]
) -> Groups:
    """(label, stats) per distinct label, labels ascending; ``codes`` index ``labels`` per row.

    Codes whose labels are equal (two string ids with one name) are merged first.
    """
    import numpy as np

    if not len(values):
        return []
    names = sorted(set(labels))
    rank = {n: i for i, n in enumerate(names)}
    lut = np.array([rank[n] for n in labels], dtype=np.int64)
    stats = segment_stats(lut[codes], values, len(names))
    return [(n, st) for n, st in zip(names, stats, strict=True) if st is not None]


def time_rows(
    groups: Groups, report: str,
) -> SummaryTable:
    """A time summary (Time (%), Total Time, count, stats, labels...) sorted by total, descending.

    ``groups`` come in label order, which breaks ties (Python's sort is stable, like the
    DataFrame path's mergesort). A label may be a tuple for reports with several label columns.
    """
    grand = float(sum(st[0] for _, st in groups))
    order = sorted(range(len(groups)), key=lambda i: -groups[i][1][0])
    n_labels = len(COLUMNS[report]) - 8
    data: list[list[Any]] = [[] for _ in range(8 + n_labels)]
    for i in order:
        label, (total, count, mean, median, vmin, vmax, std) = groups[i]
        pct = total / grand * 100.0 if grand else 0.0
        for col, v in zip(data, (pct, total, count, mean, median, vmin, vmax, std), strict=False):
            col.append(v)
        labels = label if isinstance(label, tuple) else (label,)
        for j, lab in enumerate(labels):
            data[8 + j].append(lab)
    return SummaryTable(report, data)


def id_groups(
    cols: dict[str, npt.NDArray[np.int64]], name_of: Callable[[int], str | None],
) -> Groups | None:
    """Group durations by the name of their ``nameId``; None when an id has no name."""
    import numpy as np

    ids = cols["nameId"]
    if int(ids.min()) < 0:
        return None
    small = int(ids.max()) <= 4 * len(ids) + 1_000_000  # string ids are: count, don't sort
    if small:
        present = np.flatnonzero(np.bincount(ids))
    else:
        present, inverse = np.unique(ids, return_inverse=True)
    labels: list[str] = []
    for i in present.tolist():
        name = name_of(i)
        if name is None:
            return None
        labels.append(name)
    names = sorted(set(labels))  # codes in name order: ties in total then keep name order
    rank = {n: i for i, n in enumerate(names)}
    ranks = np.array([rank[n] for n in labels], dtype=np.int64)
    codes: npt.NDArray[np.int64]
    if small:
        lut = np.zeros(int(present[-1]) + 1, dtype=np.int32)  # codes as int32: half the memory
        lut[present] = ranks
        codes = lut[ids]  # type: ignore[assignment]
    else:
        codes = ranks[inverse]
    stats = segment_stats(codes, cols["duration"], len(names))
    return [(n, st) for n, st in zip(names, stats, strict=True) if st is not None]
