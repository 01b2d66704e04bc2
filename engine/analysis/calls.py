"""The CUDA API calls of a trace as numpy columns: no DataFrame over millions of calls.

``api_calls(trace)`` (built once per trace) holds, row for row with ``trace.table("api")``, each
call's start and end, its process, thread and base name (``_vNNNN`` dropped) as small integer
codes with their labels, and its correlation id. The columns are ``trace.columns("api", ...)`` on
every trace (an nsys export's columnar cache: read once, then memory-mapped, only the columns asked
for; other traces' tables), with the process and thread as integers and names as ids of
``trace.strings()``. Labels are the texts :func:`engine.analysis.steps.pid_keys` gives, so keys
compare equal with every other table's.

Every column is loaded on first use, so a caller that needs only starts and names never maps
the rest.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.tables import small_codes as small_codes  # re-exported: its users import it from here
from engine.analysis.tables import trace_cache
from engine.reports.base import NULL

if TYPE_CHECKING:
    import numpy.typing as npt

    from engine.reports.base import Trace

I64 = np.int64
#: the columns of ``trace.columns("api", ...)`` read (an export's process and thread from globalTid;
#: names as ids of the calls' full names, whose ``_vNNNN`` suffix ``ApiCalls`` drops)
_COLS = ("start", "end", "correlationId", "nameId", "pid", "tid")
#: calls up to which they are read in the background while the kernels are (a big table is read by a
#: child process into the cache files, engine.reports.nsys.page_child; past this, one after the other)
_PREFETCH_ROWS = 25_000_000


class ApiCalls:
    """The API calls of one trace, column by column (see the module docstring).

    Attributes (arrays row for row with ``trace.table("api")``):
        start, end: int64 ns; rows without both are not ``valid``.
        pid, tid: int32 codes into ``pids``/``tids`` (process and thread ids as text, "" missing).
        name: int32 codes into ``names`` (base names), -1 for a call without a name.
        corr: correlation ids (-1 missing).
    """

    def __init__(self, trace: Trace) -> None:
        self._trace = trace
        self._kept: dict[str, npt.NDArray[Any]] = {}  # columns read where the trace maps none from a cache

    @property
    def from_columns(self) -> bool:
        """True when the trace stores every column read (one it lacks reads as NULL)."""
        return self._trace.has_columns("api", _COLS)

    # -- raw columns ---------------------------------------------------------------------------
    def _col(self, name: str) -> npt.NDArray[Any]:
        """A column of the calls (``trace.columns``).

        Mapped from the trace's cache on each use where it has one (an nsys export's); otherwise
        the columns read are kept in memory instead (read once either way).
        """
        mapped = self._trace.columns_cached("api", [name])
        if mapped is not None:
            return mapped[name]
        if name in self._kept:
            return self._kept[name]
        got = self._read_missing(name)
        # A cold read gives the cached files mapped (their pages are the OS's to drop, not this
        # process's heap); where the trace has no cache to take them, they are kept here.
        if self._trace.columns_cached("api", [name]) is None:
            self._kept.update(got)
        return got[name]

    def _read_missing(self, name: str) -> dict[str, npt.NDArray[Any]]:
        """Read ``name`` and every other column not at hand yet with it, in one request.

        Each pass over an export's table costs a full scan of it, so the columns are asked for
        together: its page reader writes them all into the cache files in one scan (SQLite's path
        splits them into as many scans as its memory needs, see engine.reports.nsys.columns).
        """
        todo = [c for c in self._uncached() if c != name]
        return self._trace.columns("api", [name, *todo])

    def _uncached(self) -> list[str]:
        cached = self._trace.columns_cached
        return [c for c in _COLS if c not in self._kept and cached("api", [c]) is None]

    def prefetch(self) -> None:
        """Start reading the columns not cached yet in the background, as the first use would.

        A summary reads the kernels first and the calls later: started early, the two table
        scans run on two cores at once, and the first use only waits for this read (a trace that
        reads in the foreground only ignores this).
        """
        todo = self._uncached()
        if not todo:  # (all cached: the table is not even counted)
            return
        rows = self._trace.row_count("api") or 1
        if rows > _PREFETCH_ROWS:
            return
        self._trace.prefetch_columns("api", todo)

    @cached_property
    def n(self) -> int:
        """Rows of the API table."""
        return len(self.start)

    @property
    def start(self) -> npt.NDArray[np.int64]:
        """Call starts (int64; meaningless where not ``valid``)."""
        return self._times("start")

    @property
    def end(self) -> npt.NDArray[np.int64]:
        """Call ends (int64; meaningless where not ``valid``)."""
        return self._times("end")

    def _times(self, name: str) -> npt.NDArray[np.int64]:
        """A time column (NULL where missing), mapped from the cache on each use where there is one.

        Not held: a mapped column's pages leave this process when the caller drops it.
        """
        return self._col(name)

    @cached_property
    def valid(self) -> npt.NDArray[np.bool_] | None:
        """Rows with both a start and an end; None when every row has them."""
        bad = (self.start == NULL) | (self.end == NULL)
        return ~bad if bad.any() else None

    @property
    def corr(self) -> npt.NDArray[np.int64]:
        """Correlation ids, -1 where missing.

        Not kept: the joins that use them run once each, and a 20M-call column mapped from the cache
        is unmapped (its pages leave this process) as soon as a join drops it.
        """
        col = self._col("correlationId")
        return np.where(col == NULL, -1, col) if (col == NULL).any() else col

    @cached_property
    def _pid(self) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        return self._keys("pid")

    @cached_property
    def _tid(self) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        return self._keys("tid")

    def _keys(self, name: str) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        """Codes of a process or thread id column in order of first appearance, the ids as text ("" NULL)."""
        col = self._col(name)
        null = col == NULL
        has_null = bool(null.any())
        vals = np.where(null, 0, col) if has_null else col
        low = int(vals.min()) if len(vals) else 0
        codes, uniq = small_codes(vals - low if low < 0 else vals)  # (small_codes takes values >= 0)
        labels = [str(int(u) + min(low, 0)) for u in uniq]
        if has_null:  # "" for the calls without a thread, as pid_keys gives
            codes = np.where(null, len(labels), codes).astype(np.int32)
            labels.append("")
            codes, labels = _renumber(codes, labels)
        return codes, tuple(labels)

    @property
    def pid(self) -> npt.NDArray[np.int32]:
        """Process codes (see ``pids``)."""
        return self._pid[0]

    @property
    def pids(self) -> tuple[str, ...]:
        """Process ids as text, by code (first appearance first)."""
        return self._pid[1]

    @property
    def tid(self) -> npt.NDArray[np.int32]:
        """Thread codes (see ``tids``)."""
        return self._tid[0]

    @property
    def tids(self) -> tuple[str, ...]:
        """Thread ids as text, by code (first appearance first)."""
        return self._tid[1]

    def codes_of(self, keys: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """The process codes of process keys (text) from another table; -2 for a process without calls."""
        import pandas as pd

        c, u = pd.factorize(keys, use_na_sentinel=True)
        lut = np.array([self.pid_code(str(k)) for k in u] + [-2], dtype=np.int64)
        lut[lut == -1] = -2
        out: npt.NDArray[np.int64] = lut[c]
        return out

    def pid_code(self, key: str) -> int:
        """The code of a process key, -1 when no call has it."""
        try:
            return self.pids.index(key)
        except ValueError:
            return -1

    @cached_property
    def _name(self) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
        col = self._col("nameId")
        null = col == NULL
        has_null = bool(null.any())
        ids = np.where(null, 0, col) if has_null else col
        # (a 69M-call column: no 0.5 GB copy where no id is negative, the usual case)
        codes, uniq = small_codes(ids if not len(ids) or int(ids.min()) >= 0 else np.maximum(ids, 0))
        del ids
        s = self._trace.strings()
        full = [s.get(int(i), f"<unknown {int(i)}>") for i in uniq]
        names = [re.sub(r"_v\d{4}$", "", str(n)) for n in full]
        if has_null:
            codes = np.where(null, -1, codes).astype(np.int32)
        return _merge_labels(codes, names)

    @property
    def name(self) -> npt.NDArray[np.int32]:
        """Base-name codes (see ``names``), -1 for a call without a name."""
        return self._name[0]

    @property
    def names(self) -> tuple[str, ...]:
        """Base names by code."""
        return self._name[1]

    @cached_property
    def category(self) -> npt.NDArray[np.int8]:
        """Each call's category, as an index into :data:`CATEGORY_ORDER`."""
        per_name = np.array([CATEGORY_ORDER.index(api_category(n)) for n in self.names]
                            + [CATEGORY_ORDER.index("other")], dtype=np.int8)
        out: npt.NDArray[np.int8] = per_name[self.name]  # -1 (no name) picks "other"
        return out


_ALLOC = re.compile(
    r"^(cuda(Malloc|Free|HostAlloc|HostRegister|HostUnregister|MallocHost|FreeHost|MallocManaged|"
    r"MallocAsync|FreeAsync|MallocPitch|Malloc3D|MallocArray|FreeArray|Malloc3DArray|"
    r"MallocFromPoolAsync|MemPool\w*|MallocMipmappedArray|FreeMipmappedArray)\w*|"
    r"cu(MemAlloc|MemFree|MemHostAlloc|MemAllocHost|MemFreeHost|MemHostRegister|MemHostUnregister|"
    r"MemCreate|MemRelease|MemMap|MemUnmap|MemAddressReserve|MemAddressFree|MemSetAccess|MemPool|"
    r"ArrayCreate|ArrayDestroy|MipmappedArray)\w*)$"
)
_COPY = re.compile(r"^(cuda(Memcpy|Memset)\w*|cu(Memcpy|Memset|MemPrefetch)\w*|cudaMemPrefetch\w*)$")
_SYNC = re.compile(
    r"^(cuda(DeviceSynchronize|StreamSynchronize|EventSynchronize|StreamWaitEvent|ThreadSynchronize)|"
    r"cu(CtxSynchronize|StreamSynchronize|EventSynchronize|StreamWaitEvent|StreamWaitValue\w*))\w*$"
)
_LAUNCH = re.compile(
    r"^(cuda(LaunchKernel|LaunchKernelExC|LaunchCooperativeKernel\w*|GraphLaunch|LaunchHostFunc|"
    r"Launch\w*)|cu(LaunchKernel\w*|LaunchCooperativeKernel\w*|GraphLaunch|LaunchHostFunc|"
    r"LaunchGrid\w*))\w*$"
)
_SETUP = re.compile(
    r"^(cuInit|cuDriverGetVersion|cudaSetDevice|cudaGetDevice\w*|cudaDeviceReset|cudaSetDeviceFlags|"
    r"cudaDeviceGetAttribute|cudaDeviceSetLimit|cudaDeviceGet\w*|cudaRuntimeGetVersion|"
    r"cudaDriverGetVersion|cudaInitDevice|cudaStreamCreate\w*|cudaStreamDestroy\w*|cudaEventCreate\w*|"
    r"cudaEventDestroy\w*|cudaFuncGetAttributes|cudaFuncSetAttribute|cudaGraphInstantiate\w*|"
    r"cudaGraphCreate|cudaGraphDestroy|cudaGraphExecDestroy|cudaStreamBeginCapture\w*|"
    r"cudaStreamEndCapture|cudaGetFuncBySymbol|cudaGetDriverEntryPoint\w*|"
    r"cu(Ctx\w*|DevicePrimaryCtx\w*|Device\w*|Module\w*|Library\w*|Kernel\w*|Func\w*|Link\w*|"
    r"StreamCreate\w*|StreamDestroy\w*|EventCreate\w*|EventDestroy\w*|GraphInstantiate\w*|"
    r"GetProcAddress\w*|GetExportTable))$"
)


#: synchronous copies: the host waits until the GPU has done them (and all before them on the stream)
_BLOCKING_COPIES = frozenset({"cudaMemcpy", "cudaMemcpy2D", "cuMemcpy", "cuMemcpyDtoH", "cuMemcpyHtoD"})


def is_blocking_sync(name: str) -> bool:
    """True for a call that makes the host wait for the GPU (its queue may then drain).

    Stream, device, event and context synchronizations (not a stream waiting on an event: that one
    returns at once) and synchronous copies; with or without the ``_vNNNN`` suffix.
    """
    base = re.sub(r"_v\d+$", "", name)
    if base in _BLOCKING_COPIES:
        return True
    return bool(_SYNC.match(base)) and not base.startswith(("cudaStreamWait", "cuStreamWait"))


def api_category(name: str) -> str:
    """Category of a CUDA API call by its name (with or without the ``_vNNNN`` suffix)."""
    base = re.sub(r"_v\d+$", "", name)
    if _SYNC.match(base):
        return "synchronization"
    if _ALLOC.match(base):
        return "allocation"
    if _COPY.match(base):
        return "copies"
    if _LAUNCH.match(base):
        return "launches"
    if _SETUP.match(base):
        return "setup"
    return "other"


#: category names by code (``ApiCalls.category``)
CATEGORY_ORDER = ("allocation", "copies", "synchronization", "launches", "setup", "other")


def _renumber(codes: npt.NDArray[np.int32], labels: list[str]) -> tuple[npt.NDArray[np.int32], list[str]]:
    """Codes renumbered in order of first appearance (after a label was added at the end)."""
    c2, u2 = small_codes(codes)
    return c2, [labels[int(u)] for u in u2]


def _merge_labels(codes: npt.NDArray[np.int32], names: list[str]
                  ) -> tuple[npt.NDArray[np.int32], tuple[str, ...]]:
    """Codes whose labels repeat (two ids, one base name) merged into one code per label."""
    uniq: dict[str, int] = {}
    remap = np.array([uniq.setdefault(n, len(uniq)) for n in names] + [-1], dtype=np.int32)
    if len(uniq) == len(names):
        return codes, tuple(names)
    out: npt.NDArray[np.int32] = remap[codes]
    return out, tuple(uniq)


def api_calls(trace: Trace) -> ApiCalls:
    """The trace's :class:`ApiCalls`, built once per trace."""
    out: ApiCalls = trace_cache(trace, "api_calls", lambda: ApiCalls(trace))
    return out


def prefetch_api_calls(trace: Trace) -> None:
    """Start reading the trace's API-call columns in the background (see :meth:`ApiCalls.prefetch`)."""
    api_calls(trace).prefetch()
