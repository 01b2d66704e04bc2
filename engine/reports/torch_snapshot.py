"""Read ``torch.cuda.memory._snapshot()`` pickles (``_dump_snapshot``) into columns.

A snapshot holds the allocator's state at the dump (``segments`` with their blocks) and, when
``_record_memory_history`` was on, a trace per device of allocator events (``alloc``,
``free_requested``, ``free_completed``, ``segment_alloc``/``segment_free``, ``segment_map``/
``segment_unmap``...), each with the Python and C++ stack that made it.

Pickles can run code when loaded; this reader refuses every class import (a snapshot holds only
dicts, lists, strings and numbers), so a hostile file fails with a sentence instead. The events
are read as a stream into numpy columns (:mod:`engine.reports.snapshot_stream`), never as one
dict each, and each distinct stack becomes one row of a stack table. The columns are cached, so a
later open maps them from disk (about 45 bytes per event).
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.reports.base import ReportInfo, Trace
from engine.system.errors import ReportError

ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "snapshot", "oom", "other")
_ACTION_CODE = {a: i for i, a in enumerate(ACTIONS)}
_COLUMNS = ("device", "action", "addr", "size", "stream", "time_us", "stack")
#: a pickle the stream reader cannot walk is loaded whole only up to this size
CHILD_BYTES = 64 * 2**20
_NOT_SNAPSHOT = ("is not a PyTorch memory snapshot (a pickle of a dict with 'segments' and "
                 "'device_traces'); save one with torch.cuda.memory._dump_snapshot(path).")
_USER_SKIP = ("/torch/", "/site-packages/", "<frozen", "??")
_ALLOCATOR_FRAMES = ("unwind", "CapturedTraceback", "gather_with_cpp", "CachingAllocator", "empty_strided",
                     "empty_generic", "at::detail::empty", "c10::impl::wrap_kernel", "redispatch")


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"the pickle asks to import {module}.{name}")


@dataclass
class SnapshotColumns:
    """A snapshot's allocator events as columns, with their stacks.

    Attributes:
        device, action, addr, size, stream, time_us, stack: one value per event (``action`` codes
            into :data:`ACTIONS`, ``stack`` into ``stacks``).
        stacks: each distinct stack summarised: the innermost Python frames of the program
            ("file.py:line function", innermost first, joined by " ← "), or its C++ frames.
        end_allocated, end_reserved: per device, bytes in live blocks and in segments at the dump.

    """

    device: Any
    action: Any
    addr: Any
    size: Any
    stream: Any
    time_us: Any
    stack: Any
    stacks: list[str]
    end_allocated: dict[int, int]
    end_reserved: dict[int, int]

    @property
    def n(self) -> int:
        """The number of events."""
        return len(self.action)


def _frame_text(f: dict[str, Any]) -> str:
    name = str(f.get("filename", ""))
    return f"{os.path.basename(name)}:{f.get('line', 0)} {f.get('name', '')}"


def summarise_stack(frames: list[dict[str, Any]], depth: int = 4) -> str:
    """The program's own innermost Python frames (else the first frames) of one stack."""
    py = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    mine = [f for f in py if not any(s in str(f.get("filename", "")) for s in _USER_SKIP)]
    # a C++-only stack (a library's workspace): the frames after the allocator's own
    native = [f for f in frames if not any(s in str(f.get("name", "")) for s in _ALLOCATOR_FRAMES)]
    chosen = (mine or py or native or frames)[:depth]
    return " ← ".join(_frame_text(f) for f in chosen) or "(no stack recorded)"


def _convert(doc: Any) -> SnapshotColumns:
    if not isinstance(doc, dict) or "segments" not in doc:
        raise ValueError("no segments")
    cols: dict[str, list[int]] = {c: [] for c in _COLUMNS}
    stacks: list[str] = []
    by_id: dict[int, int] = {}
    by_key: dict[str, int] = {}
    for dev, trace in enumerate(doc.get("device_traces") or []):
        for e in trace:
            frames = e.get("frames") or []
            code = by_id.get(id(frames))
            if code is None:
                text = summarise_stack(frames)
                code = by_key.setdefault(text, len(stacks))
                if code == len(stacks):
                    stacks.append(text)
                by_id[id(frames)] = code
            cols["device"].append(dev)
            cols["action"].append(_ACTION_CODE.get(str(e.get("action")), len(ACTIONS) - 1))
            cols["addr"].append(int(e.get("addr", 0) or 0))
            cols["size"].append(int(e.get("size", 0) or 0))
            cols["stream"].append(int(e.get("stream", 0) or 0))
            cols["time_us"].append(int(e.get("time_us", 0) or 0))
            cols["stack"].append(code)
    end_alloc, end_res = _end_state(doc)
    types = {"device": np.int32, "action": np.int8, "stack": np.int32}
    arrays = {c: np.asarray(v, dtype=types.get(c, np.int64)) for c, v in cols.items()}
    return SnapshotColumns(**arrays, stacks=stacks, end_allocated=end_alloc, end_reserved=end_res)


def _load_pickle(path: Path, *, fallback_bytes: int = CHILD_BYTES) -> SnapshotColumns:
    """The columns of a snapshot file, read as a stream (see :mod:`engine.reports.snapshot_stream`).

    A pickle the stream reader does not handle is loaded whole (classes refused) when it is small.
    """
    from engine.reports.snapshot_stream import UnsupportedPickle, stream_snapshot

    try:
        doc, sink = stream_snapshot(path, summarise_stack)
    except UnsupportedPickle as exc:
        if path.stat().st_size > fallback_bytes:
            raise ReportError(f"{path} is truncated or {_NOT_SNAPSHOT} ({exc})") from exc
        return _load_whole(path)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path} cannot be read ({exc}).") from exc
    if not isinstance(doc, dict) or "segments" not in doc:
        raise ReportError(f"{path} {_NOT_SNAPSHOT}")
    lut = np.array([_ACTION_CODE.get(a, len(ACTIONS) - 1) for a in sink.actions] or [0], dtype=np.int8)
    cols = {c: np.frombuffer(sink.cols[c], dtype=np.int64) for c in _COLUMNS}
    end_alloc, end_res = _end_state(doc)
    return SnapshotColumns(device=cols["device"].astype(np.int32), action=lut[cols["action"]],
                           addr=cols["addr"], size=cols["size"], stream=cols["stream"],
                           time_us=cols["time_us"],
                           stack=cols["stack"].astype(np.int32), stacks=sink.stacks,
                           end_allocated=end_alloc, end_reserved=end_res)


def _end_state(doc: dict[str, Any]) -> tuple[dict[int, int], dict[int, int]]:
    """Per device: bytes in live blocks and in segments at the dump."""
    end_alloc: dict[int, int] = {}
    end_res: dict[int, int] = {}
    for seg in doc["segments"]:
        d = int(seg.get("device", 0))
        end_res[d] = end_res.get(d, 0) + int(seg.get("total_size", 0))
        blocks = seg.get("blocks", [])
        live = sum(int(b.get("size", 0)) for b in blocks if b.get("state") == "active_allocated")
        end_alloc[d] = end_alloc.get(d, 0) + live
    return end_alloc, end_res


def _load_whole(path: Path) -> SnapshotColumns:
    try:
        with open(path, "rb") as f:
            doc = _NoClasses(f).load()
        return _convert(doc)
    except pickle.UnpicklingError as exc:
        if "truncated" in str(exc):
            raise ReportError(f"{path} is truncated (the pickle ends early): copy it again, or dump the "
                              "snapshot again with torch.cuda.memory._dump_snapshot(path).") from exc
        raise ReportError(f"{path} {_NOT_SNAPSHOT} ({exc})") from exc
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        raise ReportError(f"{path} is truncated or {_NOT_SNAPSHOT}") from exc


def _cache_dir(path: Path) -> Path:
    from engine.system.cache import cache_root, file_identity

    return cache_root() / "snapshots" / file_identity(path)


def _save(cols: SnapshotColumns, d: Path) -> None:
    tmp = d.with_name(d.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    for c in _COLUMNS:
        np.save(tmp / f"{c}.npy", getattr(cols, c))
    meta = {"stacks": cols.stacks, "end_allocated": cols.end_allocated, "end_reserved": cols.end_reserved}
    (tmp / "meta.json").write_text(json.dumps(meta))
    try:
        os.replace(tmp, d)
    except OSError:  # another process made it first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def _from_cache(d: Path) -> SnapshotColumns | None:
    try:
        meta = json.loads((d / "meta.json").read_text())
        from engine.reports.npy import load_npy

        arrays = {c: load_npy(d / f"{c}.npy", mmap_mode="r") for c in _COLUMNS}
    except (OSError, ValueError):
        return None
    return SnapshotColumns(**arrays, stacks=meta["stacks"],
                           end_allocated={int(k): v for k, v in meta["end_allocated"].items()},
                           end_reserved={int(k): v for k, v in meta["end_reserved"].items()})


def read_snapshot(path: Path | str) -> SnapshotColumns:
    """The snapshot's columns: from the cache, else read as a stream (and cached).

    Raises:
        ReportError: the file is not a memory snapshot, is truncated, or cannot be read.

    """
    path = Path(path)
    try:
        d = _cache_dir(path)
    except OSError as exc:
        raise ReportError(f"{path} cannot be read ({exc.strerror}).") from exc
    cached = _from_cache(d)
    if cached is not None:
        return cached
    cols = _load_pickle(path)
    try:
        d.parent.mkdir(parents=True, exist_ok=True)
        _save(cols, d)
    except OSError:
        pass  # a read-only cache: the next open reads the file again
    return cols


class SnapshotTrace(Trace):
    """A memory snapshot opened as a report: no timeline tables, only memory (see the Memory view)."""

    def __init__(self, path: Path) -> None:
        super().__init__(ReportInfo(path=Path(path), kind="snapshot"))
        self.info.product_version = "PyTorch memory snapshot"
        self.columns_ = read_snapshot(path)

    def _load(self, name: str, columns: list[str]) -> Any:
        self._mark_missing(name, "a PyTorch memory snapshot holds allocator events only")
        return None
