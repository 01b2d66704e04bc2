"""The Kineto reader as it was before the columnar one: json.load of the document, one dict per event.

Kept to check that :class:`engine.reports.kineto.KinetoTrace` gives the same tables (its reference).
Reads PyTorch profiler (Kineto) Chrome traces (``.json`` / ``.json.gz``) into the common tables.

Kineto writes complete events (``ph: "X"``) with ``ts``/``dur`` in microseconds (fractional, ns
resolution). We convert to integer ns relative to the earliest time any event records
(:func:`time_origin_us`), like nsys's session-relative times, so no time is negative, and keep the
absolute base in ``base_ts_us``/``base_time_ns``.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.pytorch.events import (
    _MODULE_PREFIX,
    _STEP_RE,
    ANNOTATION,
    API,
    KERNEL,
    MEMCPY,
    MEMSET,
    MODULE,
    OP,
    PYTHON,
    STEP,
    CodedTexts,
    TorchEvents,
    _mark_backward,
    _merge_dispatch_duplicates,
    _nest,
    _Rows,
    thread_label,
)
from engine.analysis.pytorch.memory import _CUDA_DEVICE_TYPE, MemoryCurve, MemoryTimeline
from engine.reports.base import TABLES, ReportInfo, Trace
from engine.system.errors import ReportError

if TYPE_CHECKING:
    import pandas as pd

_COPY_KINDS = {"HtoD": 1, "DtoH": 2, "HtoA": 3, "AtoH": 4, "AtoA": 5, "AtoD": 6, "DtoA": 7,
               "DtoD": 8, "HtoH": 9, "PtoP": 10}
_COPY_LABELS = {1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array", 4: "Array-to-Host",
                5: "Array-to-Array", 6: "Array-to-Device", 7: "Device-to-Array",
                8: "Device-to-Device", 9: "Host-to-Host", 10: "Peer-to-Peer"}
_MEM_KINDS = {"Pageable": 0, "Pinned": 1, "Device": 2, "Array": 3, "Managed": 4}
_MEMCPY_RE = re.compile(r"Memcpy (\w+) \((\w+) -> (\w+)\)")
_MEMSET_RE = re.compile(r"Memset \((\w+)\)")


def load_json_trace(path: Path) -> dict[str, Any]:
    """Parse a (possibly gzipped) Chrome trace file; raise ReportError with a clear sentence."""
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except FileNotFoundError as exc:
        raise ReportError(
            f"{path} no longer exists (it was moved or deleted while being opened); check the "
            "path and open it again."
        ) from exc
    except PermissionError as exc:
        raise ReportError(f"{path} cannot be read: permission denied; check its permissions.") from exc
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise ReportError(
            f"{path} could not be read or decompressed ({exc}); the file may be truncated: copy "
            "it again or save the trace again with torch.profiler's export_chrome_trace."
        ) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(
            f"{path} is not valid JSON ({exc}); the trace may be truncated: save it again with "
            "torch.profiler's export_chrome_trace."
        ) from exc
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list) or not any(
        isinstance(e, dict) and e.get("ph") == "X" for e in events
    ):
        raise ReportError(
            f"{path} is JSON but not a Chrome/PyTorch profiler trace (no traceEvents with complete "
            "events); export one with torch.profiler's export_chrome_trace."
        )
    return doc if isinstance(doc, dict) else {"traceEvents": events}


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def time_origin_us(events: list[Any]) -> float:
    """The earliest time (µs) an event records: the origin of every relative time (all ≥ 0).

    Complete events count from the earlier of their start and end (a negative duration ends before
    it starts), instants, counters and flows from their ``ts``; metadata events (``ph: "M"``) are
    left out, as their ``ts`` is arbitrary (0 in some writers). 0 when no event has a time.
    """
    lo = math.inf
    for e in events:
        if not isinstance(e, dict) or e.get("ph") == "M":
            continue
        t = _float(e.get("ts"))
        if t is None:
            continue
        if e.get("ph") == "X":
            t = min(t, t + (_float(e.get("dur")) or 0.0))
        lo = min(lo, t)
    return lo if math.isfinite(lo) else 0.0


class ReferenceKinetoTrace(Trace):
    """A PyTorch profiler trace mapped onto the nsys-like tables."""

    def __init__(self, path: Path) -> None:
        super().__init__(ReportInfo(path=Path(path), kind="kineto"))
        self.doc = load_json_trace(Path(path))
        schema = self.doc.get("schemaVersion")
        # Traces from other Chrome-trace writers (or hand-trimmed ones) carry no schema version.
        self.info.product_version = (f"Kineto schema {schema}" if schema is not None
                                     else "a Chrome/PyTorch profiler trace with no Kineto schema version")
        events = [e for e in self.doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
        self._events = events
        self.base_ts_us = time_origin_us(self.doc["traceEvents"])
        self.base_time_ns = self.doc.get("baseTimeNanoseconds")

    def _ns(self, e: dict[str, Any]) -> tuple[int, int]:
        start = round((float(e["ts"]) - self.base_ts_us) * 1000.0)
        return start, start + round(float(e.get("dur", 0.0)) * 1000.0)

    def _launch_pids(self) -> dict[Any, Any]:
        """Correlation id -> pid of the CPU thread that made the runtime/driver call."""
        if not hasattr(self, "_corr_pid"):
            self._corr_pid = {
                e.get("args", {}).get("correlation"): e.get("pid")
                for e in self._rows(("cuda_runtime", "cuda_driver", "Runtime", "Driver"))
            }
        return self._corr_pid

    def _gpu_pid(self, e: dict[str, Any]) -> Any:
        # Kineto puts the device index in a GPU event's "pid"; the process is the launcher's.
        return self._launch_pids().get(e.get("args", {}).get("correlation"))

    def _rows(self, cats: tuple[str, ...]) -> list[dict[str, Any]]:
        return [e for e in self._events if e.get("cat") in cats and "ts" in e]

    def _frame(self, name: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
        import pandas as pd

        df = pd.DataFrame.from_records(rows, columns=list(TABLES[name][0]))
        return df

    def _load(self, name: str, columns: list[str]) -> pd.DataFrame | None:
        # Kineto traces are small and already parsed: build whole tables.
        loader = getattr(self, f"_load_{name}", None)
        if loader is None:
            self._mark_missing(name, f"{TABLES[name][1]} are not part of PyTorch profiler traces")
            return None
        result: pd.DataFrame | None = loader()
        return result

    def _load_kernels(self) -> pd.DataFrame | None:
        rows = []
        for e in self._rows(("kernel",)):
            a = e.get("args", {})
            s, t = self._ns(e)
            grid = a.get("grid", [None] * 3)
            block = a.get("block", [None] * 3)
            rows.append({
                "start": s, "end": t, "deviceId": a.get("device"), "contextId": a.get("context"),
                "streamId": a.get("stream"), "correlationId": a.get("correlation"),
                "pid": self._gpu_pid(e), "globalPid": None, "name": e.get("name"),
                "shortName": e.get("name"), "mangledName": None,
                "gridX": grid[0], "gridY": grid[1], "gridZ": grid[2],
                "blockX": block[0], "blockY": block[1], "blockZ": block[2],
                "registersPerThread": a.get("registers per thread"),
                "staticSharedMemory": None, "dynamicSharedMemory": a.get("shared memory"),
                "localMemoryTotal": None, "graphNodeId": None, "greenContextId": None,
            })
        return self._frame("kernels", rows)

    def _load_memcpy(self) -> pd.DataFrame:
        rows = []
        for e in self._rows(("gpu_memcpy", "Memcpy")):
            a = e.get("args", {})
            s, t = self._ns(e)
            m = _MEMCPY_RE.match(str(e.get("name", "")))
            kind = _COPY_KINDS.get(m.group(1), 0) if m else 0
            src = m.group(2) if m else "Unknown"
            dst = m.group(3) if m else "Unknown"
            rows.append({
                "start": s, "end": t, "deviceId": a.get("device"), "contextId": a.get("context"),
                "streamId": a.get("stream"), "correlationId": a.get("correlation"),
                "pid": self._gpu_pid(e), "globalPid": None, "bytes": a.get("bytes"),
                "copyKind": kind, "operation": _COPY_LABELS.get(kind, "Unknown"),
                "srcKind": _MEM_KINDS.get(src, 7), "dstKind": _MEM_KINDS.get(dst, 7),
                "srcKindName": src, "dstKindName": dst, "greenContextId": None,
                "srcDeviceId": None, "dstDeviceId": None,
            })
        return self._frame("memcpy", rows)

    def _load_memset(self) -> pd.DataFrame:
        rows = []
        for e in self._rows(("gpu_memset", "Memset")):
            a = e.get("args", {})
            s, t = self._ns(e)
            m = _MEMSET_RE.match(str(e.get("name", "")))
            kind_name = m.group(1) if m else "Unknown"
            rows.append({
                "start": s, "end": t, "deviceId": a.get("device"), "contextId": a.get("context"),
                "streamId": a.get("stream"), "correlationId": a.get("correlation"),
                "pid": self._gpu_pid(e), "globalPid": None, "bytes": a.get("bytes"),
                "memKind": _MEM_KINDS.get(kind_name, 7), "memKindName": kind_name, "value": None,
                "greenContextId": None,
            })
        return self._frame("memset", rows)

    def _load_api(self) -> pd.DataFrame:
        rows = []
        for e in self._rows(("cuda_runtime", "cuda_driver", "Runtime", "Driver")):
            a = e.get("args", {})
            s, t = self._ns(e)
            name = str(e.get("name", ""))
            rows.append({
                "start": s, "end": t, "globalTid": None, "pid": e.get("pid"), "tid": e.get("tid"),
                "correlationId": a.get("correlation"), "name": name,
                "baseName": re.sub(r"_v\d{4}$", "", name),
                "eventClass": 1 if e.get("cat") in ("cuda_driver", "Driver") else 0,
                "returnValue": None,
            })
        return self._frame("api", rows)

    def _load_cpu_ops(self) -> pd.DataFrame:
        rows = []
        for e in self._rows(("cpu_op", "user_annotation", "python_function", "Operator")):
            s, t = self._ns(e)
            rows.append({
                "start": s, "end": t, "pid": e.get("pid"), "tid": e.get("tid"),
                "name": e.get("name"), "correlationId": e.get("args", {}).get("External id"),
            })
        return self._frame("cpu_ops", rows)

    def _load_nvtx(self) -> pd.DataFrame | None:
        # torch.profiler records record_function / NVTX-like user annotations as user_annotation.
        rows = []
        for e in self._rows(("user_annotation",)):
            s, t = self._ns(e)
            rows.append({
                "start": s, "end": t, "eventType": 59, "text": e.get("name"), "domainId": 0,
                "domain": "", "globalTid": None, "pid": e.get("pid"), "tid": e.get("tid"),
                "category": None,
            })
        if not rows:
            self._mark_missing("nvtx", "the trace has no user annotations (record_function ranges)")
            return None
        return self._frame("nvtx", rows)

    def _load_gpus(self) -> pd.DataFrame | None:
        import pandas as pd

        props = self.doc.get("deviceProperties") or []
        if not props:
            self._mark_missing("gpus", "the trace has no deviceProperties")
            return None
        rows = [{
            "id": p.get("id"), "name": p.get("name"), "smCount": p.get("numSms"),
            "memoryBandwidth": None, "clockRate": None, "totalMemory": p.get("totalGlobalMem"),
            "l2CacheSize": None, "computeMajor": p.get("computeMajor"),
            "computeMinor": p.get("computeMinor"), "uuid": None, "busLocation": None,
        } for p in props]
        return pd.DataFrame.from_records(rows, columns=list(TABLES["gpus"][0]))

    def _load_processes(self) -> pd.DataFrame:
        rows = [
            {"globalPid": None, "pid": e.get("pid"), "name": e.get("args", {}).get("name")}
            for e in self.doc["traceEvents"]
            if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"
        ]
        return self._frame("processes", rows)

    def _load_threads(self) -> pd.DataFrame:
        rows = [
            {"globalTid": None, "pid": e.get("pid"), "tid": e.get("tid"),
             "name": e.get("args", {}).get("name")}
            for e in self.doc["traceEvents"]
            if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name"
        ]
        return self._frame("threads", rows)


# -- the PyTorch events and memory curves as engine/analysis/pytorch built them from the document
def reference_torch_events(trace: Any) -> TorchEvents:
    """TorchEvents from the document's event dicts (nested, backward and merged as the engine does)."""
    events = [e for e in trace.doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    base = trace.base_ts_us
    rows = _Rows()
    gpu: list[dict[str, Any]] = []
    for e in events:
        cat = e.get("cat")
        if cat in ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"):
            gpu.append(e)
            continue
        kind = _kineto_category(cat, str(e.get("name", "")))
        if kind is None:
            continue
        a = e.get("args") or {}
        s = round((float(e["ts"]) - base) * 1000.0)
        rows.add(str(e.get("name", "")), kind, s, s + round(float(e.get("dur", 0.0)) * 1000.0),
                 thread_label(e.get("pid"), e.get("tid")), seq=_int(a.get("Sequence number"), -1),
                 shapes=_dims_text(a.get("Input Dims")), dtypes=_dims_text(a.get("Input type")),
                 ext=_int(a.get("External id"), -1) if kind in (OP, ANNOTATION) else -1)
    ev, ext = rows.columns("kineto")
    _kineto_gpu(ev, gpu, base, ext)
    _nest(ev)
    _mark_backward(ev)
    _merge_dispatch_duplicates(ev)
    return ev


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _kineto_category(cat: Any, name: str) -> int | None:
    if cat in ("cpu_op", "Operator"):
        return OP
    if cat == "user_annotation":
        return STEP if _STEP_RE.match(name) else ANNOTATION
    if cat == "python_function":
        return MODULE if name.startswith(_MODULE_PREFIX) else PYTHON
    if cat in ("cuda_runtime", "cuda_driver", "Runtime", "Driver"):
        return API  # children whose time is not an operator's self time (as key_averages counts it)
    return None


def _kineto_gpu(ev: TorchEvents, gpu: list[dict[str, Any]], base: float, ext: Any) -> None:
    """Fill the GPU columns; each operation's launcher is the operator with its ``External id``."""
    by_ext: dict[int, int] = {}
    for i in np.flatnonzero(ext >= 0):
        by_ext.setdefault(int(ext[i]), int(i))  # the operator, not a later annotation with the id
    gpu.sort(key=lambda e: float(e["ts"]))
    names: dict[str, int] = {}
    code, kind, start, end, dev, stream, nbytes, op = [], [], [], [], [], [], [], []
    grid: list[str] = []
    block: list[str] = []
    for e in gpu:
        a = e.get("args") or {}
        name = str(e.get("name", ""))
        code.append(names.setdefault(name, len(names)))
        cat = e.get("cat")
        kind.append(KERNEL if cat in ("kernel", "Kernel")
                    else MEMCPY if cat in ("gpu_memcpy", "Memcpy") else MEMSET)
        s = round((float(e["ts"]) - base) * 1000.0)
        start.append(s)
        end.append(s + round(float(e.get("dur", 0.0)) * 1000.0))
        dev.append(_int(a.get("device"), 0))
        stream.append(_int(a.get("stream"), 0))
        nbytes.append(_int(a.get("bytes"), 0))
        grid.append(_dims_text(a.get("grid")))
        block.append(_dims_text(a.get("block")))
        op.append(by_ext.get(_int(a.get("External id"), -1), -1))
    ev.gpu_names = list(names)
    ev.gpu_name = np.asarray(code, dtype=np.int32)
    ev.gpu_kind = np.asarray(kind, dtype=np.int8)
    ev.gpu_start = np.asarray(start, dtype=np.int64)
    ev.gpu_end = np.asarray(end, dtype=np.int64)
    ev.gpu_device = np.asarray(dev, dtype=np.int32)
    ev.gpu_stream = np.asarray(stream, dtype=np.int64)
    ev.gpu_bytes = np.asarray(nbytes, dtype=np.int64)
    ev.gpu_op = np.asarray(op, dtype=np.int64)
    ev.gpu_grid, ev.gpu_block = CodedTexts.of(grid), CodedTexts.of(block)

def _dims_text(value: Any) -> str:
    if not value:
        return ""
    return str(value).replace(" ", "")


def reference_memory(trace: Any) -> MemoryTimeline:
    """The memory curves from the document's ``[memory]`` event dicts."""
    base = trace.base_ts_us
    per_dev: dict[int, list[tuple[float, int, int, int]]] = {}
    for e in trace.doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("name") != "[memory]":
            continue
        a = e.get("args") or {}
        if a.get("Device Type") != _CUDA_DEVICE_TYPE:
            continue
        try:
            row = (float(e["ts"]), int(a["Total Allocated"]), int(a["Total Reserved"]),
                   int(a.get("Bytes", 0)))
        except (KeyError, TypeError, ValueError):
            continue
        per_dev.setdefault(int(a.get("Device Id", 0)), []).append(row)
    tl = MemoryTimeline("kineto", "PyTorch's caching allocator: allocated = bytes in live tensors, "
                        "reserved = bytes the allocator holds from the driver.")
    for dev, rows in sorted(per_dev.items()):
        rows.sort(key=lambda r: r[0])
        arr = np.asarray(rows, dtype=np.float64)
        tl.curves.append(MemoryCurve(
            device=dev, time_ns=np.round((arr[:, 0] - base) * 1000.0).astype(np.int64),
            allocated=arr[:, 1].astype(np.int64), reserved=arr[:, 2].astype(np.int64),
            events=np.sign(arr[:, 3]).astype(np.int8)))
    if not per_dev:
        tl.notes.append("The trace has no GPU memory events: record it with "
                        "torch.profiler.profile(profile_memory=True).")
    return tl
