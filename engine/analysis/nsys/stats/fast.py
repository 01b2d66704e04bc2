"""The five core reports of an nsys SQLite export without pandas (the cold CLI path).

Column-wise reads in threads and numpy segment statistics, printing the same bytes as the
DataFrame path (:mod:`engine.analysis.nsys.stats.frames`); pandas' import alone costs more than
the work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from engine.analysis.nsys.stats.catalog import _API_SUFFIX, _NVTX_STYLES, _TEXT_COLS, COLUMNS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.reports.base import Trace
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace, SummaryColumns


# -- the five core reports without pandas --------------------------------------------------------
#: Reports :func:`fast_reports` computes straight from an nsys SQLite export.
FAST_REPORTS = ("cuda_api_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum",
                "nvtx_sum", "cuda_api_gpu_sum", "cuda_gpu_sum")


_FAST_TABLES: dict[str, set[str]] = {
    "cuda_api_sum": {"api"}, "cuda_gpu_kern_sum": {"kernels"}, "cuda_gpu_mem_time_sum": {"memcpy", "memset"},
    "cuda_gpu_mem_size_sum": {"memcpy", "memset"}, "nvtx_sum": set(),
    "cuda_api_gpu_sum": {"api", "kernels", "memcpy", "memset"},
    "cuda_gpu_sum": {"kernels", "memcpy", "memset"},
}


class SummaryTable:
    """A computed report as plain columns (what :func:`fast_reports` returns; no pandas needed).

    ``data`` holds one list per column of :data:`COLUMNS` ``[report]``; ``numeric`` says which
    columns are numbers (right-aligned in tables). :func:`to_csv` and :func:`format_table` accept
    it as they accept a DataFrame and print the same text; :meth:`to_frame` gives the DataFrame.
    """

    def __init__(self, report: str, data: list[list[Any]]) -> None:
        self.report = report
        self.columns: tuple[str, ...] = COLUMNS[report]
        self.data = data
        self.numeric = tuple(c not in _TEXT_COLS for c in self.columns)

    @property
    def empty(self) -> bool:
        """True when the report has no rows."""
        return not self.data or not self.data[0]

    def __len__(self) -> int:
        return len(self.data[0]) if self.data else 0

    def to_frame(self) -> pd.DataFrame:
        """The same table as :func:`run_report` returns (numbers numeric, nsys column names)."""
        import pandas as pd

        if self.empty:
            from engine.analysis.nsys.stats.frames import empty_frame

            return empty_frame(self.report)
        return pd.DataFrame({c: v for c, v in zip(self.columns, self.data, strict=True)})



def _segment_stats(
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
    """:func:`_segment_stats` one group at a time, with the same arithmetic (same bytes out)."""
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


def _grouped(
    labels: Sequence[str], codes: npt.NDArray[np.int64], values: npt.NDArray[np.int64]
) -> list[tuple[str, tuple[int, int, float, float, int, int, float]]]:
    """(label, stats) per distinct label, labels ascending; ``codes`` index ``labels`` per row.

    Codes whose labels are equal (two string ids with one name) are merged first.
    """
    import numpy as np

    if not len(values):
        return []
    names = sorted(set(labels))
    rank = {n: i for i, n in enumerate(names)}
    lut = np.array([rank[n] for n in labels], dtype=np.int64)
    stats = _segment_stats(lut[codes], values, len(names))
    return [(n, st) for n, st in zip(names, stats, strict=True) if st is not None]


def _time_rows(
    groups: list[tuple[Any, tuple[int, int, float, float, int, int, float]]], report: str,
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


def _id_groups(
    cols: dict[str, npt.NDArray[np.int64]], name_of: Callable[[int], str | None],
) -> list[tuple[str, tuple[int, int, float, float, int, int, float]]] | None:
    """Group durations by the name of their ``nameId``; None when an id has no name."""
    import numpy as np

    ids = cols["nameId"]
    if int(ids.min()) < 0:
        return None
    small = int(ids.max()) <= 4 * len(ids) + 1_000_000  # StringIds ids are: count, don't sort
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
    stats = _segment_stats(codes, cols["duration"], len(names))
    return [(n, st) for n, st in zip(names, stats, strict=True) if st is not None]


def _memop_groups(
    trace: NsysSqliteTrace, memcpy: dict[str, npt.NDArray[np.int64]] | None,
    memset: dict[str, npt.NDArray[np.int64]] | None, value: str,
) -> list[tuple[str, tuple[int, int, float, float, int, int, float]]]:
    import numpy as np

    from engine.reports.nsys.sqlite_trace import COPY_KIND_LABELS

    labels: list[str] = []
    codes, values = [], []
    if memcpy is not None:
        kinds = trace.enum_labels("ENUM_CUDA_MEMCPY_OPER", COPY_KIND_LABELS)
        present = np.unique(memcpy["copyKind"])
        labels += [f"[CUDA memcpy {kinds.get(k, 'Unknown')}]" for k in present.tolist()]
        codes.append(np.searchsorted(present, memcpy["copyKind"]))
        values.append(memcpy[value])
    if memset is not None:
        codes.append(np.full(len(memset[value]), len(labels), dtype=np.int64))
        labels.append("[CUDA memset]")
        values.append(memset[value])
    return _grouped(labels, np.concatenate(codes), np.concatenate(values))


def fast_reports(trace: Trace, names: Sequence[str], *, csv: bool = False,
                 nvtx_groups: Callable[[NsysSqliteTrace], Any] | None = None) -> dict[str, Any]:
    """Compute the five core reports of an nsys SQLite export without pandas (the cold CLI path).

    Each big table is read once, column-wise, in background threads (all reads start before
    numpy is imported), and shared by the reports that use it; groups are sorted once and
    summarised with numpy segment reductions. The text is the same as :func:`run_report` +
    :func:`to_csv` (checked on every fixture in tests/engine/analysis/test_nsys_stats.py).

    Args:
        trace: an opened trace; only :class:`~engine.reports.nsys.sqlite_trace.NsysSqliteTrace` has a
            fast path.
        names: report names (current spelling, see :func:`resolve_report_name`).
        csv: the caller prints CSV: ``cuda_gpu_trace`` then comes back already rendered, as a
            :class:`~engine.analysis.nsys.stats.traces.CsvTable` (vectorised formatting).
        nvtx_groups: groups nvtx_sum's ranges as ``trace.nvtx_range_groups()`` does (None: that
            method answers instead), e.g. from the columnar cache.

    Returns:
        Report name -> table, for the reports it could compute; the others (other reports,
        other readers, NULL times or names that the general path handles) are left out.

    """
    from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

    out: dict[str, Any] = {}
    if csv and "cuda_gpu_trace" in names and isinstance(trace, NsysSqliteTrace):
        from engine.analysis.nsys.stats.traces import gpu_trace_csv

        table = gpu_trace_csv(trace)
        if table is not None:
            out["cuda_gpu_trace"] = table
    if csv and "cuda_api_trace" in names and isinstance(trace, NsysSqliteTrace):
        from engine.analysis.nsys.stats.traces import api_trace_csv

        api_table = api_trace_csv(trace)
        if api_table is not None:
            out["cuda_api_trace"] = api_table
    wanted = [n for n in dict.fromkeys(names) if n in FAST_REPORTS]
    if not isinstance(trace, NsysSqliteTrace) or not wanted:
        return out
    tables = {t for n in wanted for t in _FAST_TABLES[n]}
    # Tables are read one after the other (each read uses two threads): the next one is read
    # while the current one is summarised, so at most two tables' columns are held at a time.
    order = [t for t in ("api", "kernels", "memset", "memcpy") if t in tables]
    reads: dict[str, SummaryColumns | None] = {}

    def start_next() -> None:
        for t in order:
            if t not in reads and t not in taken:
                reads[t] = trace.read_summary_columns(t)
                return

    taken: set[str] = set()
    start_next()  # the first read runs while NVTX is grouped in SQLite on this thread
    if "nvtx_sum" in wanted:
        ranges = nvtx_groups(trace) if nvtx_groups is not None else None
        if ranges is None:
            ranges = trace.nvtx_range_groups()
        if ranges is not None:
            out["nvtx_sum"] = _nvtx_table(ranges)
    # Each table's groups are computed as soon as its columns are in, and the columns dropped:
    # a 69M-call table is never held together with the others (bounded memory at 10M kernels).
    strings = trace.strings()
    Groups = list[tuple[Any, tuple[int, int, float, float, int, int, float]]]
    failed: set[str] = set()

    def take(table: str) -> dict[str, npt.NDArray[np.int64]] | None:
        if table not in order:
            return None
        if table not in reads:
            start_next()
        r = reads.pop(table, None)
        taken.add(table)
        got = r.result() if r is not None else None
        start_next()
        if r is None:
            return None
        if got is None:
            failed.add(table)  # a NULL: the general path computes the reports of this table
        return got

    api_groups: Groups | None = []
    kernel_groups: Groups | None = []
    mem_groups: Groups = []
    size_groups: Groups = []
    api = take("api")
    if api is not None:
        api_groups = _id_groups(api, lambda i: _API_SUFFIX.sub("", strings.get(i, f"<unknown {i}>")))
    del api
    k = take("kernels")
    if k is not None:
        kernel_groups = _id_groups(k, strings.get)
    del k
    memcpy, memset = take("memcpy"), take("memset")
    if memcpy is not None or memset is not None:
        if any(n in wanted for n in ("cuda_gpu_mem_time_sum", "cuda_api_gpu_sum", "cuda_gpu_sum")):
            mem_groups = _memop_groups(trace, memcpy, memset, "duration")
        if "cuda_gpu_mem_size_sum" in wanted:
            size_groups = _memop_groups(trace, memcpy, memset, "bytes")
    del memcpy, memset
    wanted = [n for n in wanted if not failed & _FAST_TABLES[n]]
    if "cuda_api_sum" in wanted and api_groups is not None:
        out["cuda_api_sum"] = _time_rows(api_groups, "cuda_api_sum")
    if "cuda_gpu_kern_sum" in wanted and kernel_groups is not None:
        out["cuda_gpu_kern_sum"] = _time_rows(kernel_groups, "cuda_gpu_kern_sum")
    if "cuda_gpu_mem_time_sum" in wanted:
        out["cuda_gpu_mem_time_sum"] = _time_rows(mem_groups, "cuda_gpu_mem_time_sum")
    if "cuda_gpu_mem_size_sum" in wanted:
        out["cuda_gpu_mem_size_sum"] = _size_table(size_groups)
    # The combined summaries: each category's groups in name order, then by total (stable).
    parts = {"CUDA_API": api_groups, "CUDA_KERNEL": kernel_groups, "MEMORY_OPER": mem_groups}
    for report, cats in (("cuda_api_gpu_sum", ("CUDA_API", "CUDA_KERNEL", "MEMORY_OPER")),
                         ("cuda_gpu_sum", ("CUDA_KERNEL", "MEMORY_OPER"))):
        if report in wanted and all(parts[c] is not None for c in cats):
            combined = [((c, name), st) for c in cats for name, st in parts[c] or []]
            out[report] = _time_rows(combined, report)
    return out


def _size_table(groups: list[tuple[str, tuple[int, int, float, float, int, int, float]]]) -> SummaryTable:
    """cuda_gpu_mem_size_sum from byte statistics (MB = bytes / 1e6, as nsys prints them)."""
    rows = [
        (total / 1e6, count, mean / 1e6, median / 1e6, vmin / 1e6, vmax / 1e6, std / 1e6, name)
        for name, (total, count, mean, median, vmin, vmax, std) in groups
    ]
    rows.sort(key=lambda r: -r[0])
    return SummaryTable("cuda_gpu_mem_size_sum", [list(c) for c in zip(*rows, strict=True)] if rows
                        else [[] for _ in COLUMNS["cuda_gpu_mem_size_sum"]])


def _nvtx_table(ranges: list[tuple[int, str, npt.NDArray[np.int64]]]) -> SummaryTable:
    import numpy as np

    keys = sorted({(name, _NVTX_STYLES[etype]) for etype, name, _ in ranges})
    if not keys:
        return SummaryTable("nvtx_sum", [[] for _ in COLUMNS["nvtx_sum"]])
    rank = {k: i for i, k in enumerate(keys)}
    codes = np.concatenate([np.full(len(d), rank[(name, _NVTX_STYLES[e])], dtype=np.int64)
                            for e, name, d in ranges])
    values = np.concatenate([d for _, _, d in ranges])
    stats = _segment_stats(codes, values, len(keys))
    groups = [((style, name), st) for (name, style), st in zip(keys, stats, strict=True) if st is not None]
    return _time_rows(groups, "nvtx_sum")
