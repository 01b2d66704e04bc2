"""Read a Kineto (PyTorch profiler) trace as a stream into columns, never as one dict per event.

``json.loads`` of a trace builds every event as a dict (about 6x the file in memory: 2.8 GB for a
461 MB trace). Here the file is read in blocks (gzip too), each event is decoded with the C JSON
decoder's ``raw_decode`` from the block, its fields go into typed columns at once and the event is
dropped, so memory holds one block and the columns.

The columns keep what the readers and analyses use: per complete event (``ph: "X"``) its category,
name, process and thread, start and duration, and the args that link and describe GPU work
(``External id``, ``correlation``, device, stream, bytes, grid, block, registers, shared memory,
``Sequence number``, ``Input Dims`` / ``Input type``); the ``[memory]`` instant events; the process
and thread names; and the document's other top-level keys (``deviceProperties``, ...).
"""

from __future__ import annotations

import gzip
import json
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

BLOCK = 32 * 2**20
#: int args kept as columns (NULL: -1 << 62)
INT_ARGS = ("External id", "correlation", "device", "stream", "bytes", "context", "Sequence number",
            "Fwd thread id", "registers per thread", "shared memory")
#: text args kept as codes into a table of distinct texts ("" when absent)
TEXT_ARGS = ("grid", "block", "Input Dims", "Input type")
NULL = -(1 << 62)
MEMORY_FIELDS = ("ts", "allocated", "reserved", "bytes", "device", "device_type")
_INT_INDEX = {k: i for i, k in enumerate(INT_ARGS)}
_TEXT_INDEX = {k: i for i, k in enumerate(TEXT_ARGS)}


def _to_int(v: Any) -> int:
    try:
        x = int(v)
    except (TypeError, ValueError, OverflowError):
        return NULL
    return x if -(2**63) <= x < 2**63 else NULL
_WS = re.compile(r"[\s,]*")
_KEY = re.compile(r'"traceEvents"\s*:\s*\[')


class _Codes:
    """Distinct values -> small integer codes, in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def code(self, v: Any) -> int:
        c = self.index.get(v)
        if c is None:
            c = self.index[v] = len(self.values)
            self.values.append(v)
        return c


@dataclass
class KinetoColumns:
    """A trace's events as columns (see the module docstring).

    Attributes:
        cat, name, pid, tid: codes into ``cats``, ``names``, ``pids``, ``tids`` (pids and tids as
            they were in the JSON: ints or strings).
        ts, dur: microseconds, as written (float64).
        ints: one int64 column per :data:`INT_ARGS` name (NULL where absent).
        texts: one code column per :data:`TEXT_ARGS` name into ``text_values`` ("" absent).
        memory: the ``[memory]`` events: ts, allocated, reserved, bytes, device, device_type.
        processes, threads: (pid, name) and (pid, tid, name) from the metadata events.
        meta: the document's other top-level keys.

    """

    cat: Any
    name: Any
    pid: Any
    tid: Any
    ts: Any
    dur: Any
    cats: list[str]
    names: list[str]
    pids: list[Any]
    tids: list[Any]
    ints: dict[str, Any]
    texts: dict[str, Any]
    text_values: list[str]
    memory: dict[str, Any]
    processes: list[tuple[Any, str]] = field(default_factory=list)
    threads: list[tuple[Any, Any, str]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Complete events."""
        return len(self.ts)


class _Builder:
    def __init__(self) -> None:
        self.cat, self.name, self.pid, self.tid = array("i"), array("i"), array("i"), array("i")
        self.ts, self.dur = array("d"), array("d")
        self.int_flat = array("q")  # len(INT_ARGS) values per event
        self.text_flat = array("i")
        self.cats, self.names, self.pids, self.tids, self.text_values = (_Codes() for _ in range(5))
        self.text_values.code("")
        self.memory = {k: array("d") for k in MEMORY_FIELDS}
        self.processes: list[tuple[Any, str]] = []
        self.threads: list[tuple[Any, Any, str]] = []

    def add(self, e: Any) -> None:
        if not isinstance(e, dict):
            return
        ph = e.get("ph")
        if ph == "X" and "ts" in e:
            self._complete(e)
        elif ph == "i" and e.get("name") == "[memory]":
            a = e.get("args") or {}
            m = self.memory
            try:
                row = (float(e["ts"]), float(a.get("Total Allocated", 0)),
                       float(a.get("Total Reserved", 0)), float(a.get("Bytes", 0)),
                       float(a.get("Device Id", 0)), float(a.get("Device Type", -1)))
            except (TypeError, ValueError, KeyError):
                return
            for k, v in zip(m, row, strict=True):
                m[k].append(v)
        elif ph == "M":
            a = e.get("args") or {}
            if e.get("name") == "process_name":
                self.processes.append((e.get("pid"), str(a.get("name", ""))))
            elif e.get("name") == "thread_name":
                self.threads.append((e.get("pid"), e.get("tid"), str(a.get("name", ""))))

    def _complete(self, e: dict[str, Any]) -> None:
        try:
            ts = float(e["ts"])
            dur = float(e.get("dur", 0.0) or 0.0)
        except (TypeError, ValueError):
            return
        self.ts.append(ts)
        self.dur.append(dur)
        self.cat.append(self.cats.code(e.get("cat")))
        self.name.append(self.names.code(str(e.get("name", ""))))
        self.pid.append(self.pids.code(e.get("pid")))
        self.tid.append(self.tids.code(e.get("tid")))
        a = e.get("args")
        ints = [NULL] * len(INT_ARGS)
        texts = [0] * len(TEXT_ARGS)
        if a:
            for k, v in a.items():
                i = _INT_INDEX.get(k)
                if i is not None:
                    if type(v) is int and -(2**63) <= v < 2**63:
                        ints[i] = v
                    elif v is not None:
                        ints[i] = _to_int(v)
                    continue
                t = _TEXT_INDEX.get(k)
                if t is not None and v is not None:
                    texts[t] = self.text_values.code(v if isinstance(v, str) else str(v).replace(" ", ""))
        self.int_flat.extend(ints)
        self.text_flat.extend(texts)

    def columns(self, meta: dict[str, Any]) -> KinetoColumns:
        def arr(a: array[Any], dt: Any) -> Any:
            return np.frombuffer(a, dtype=dt) if len(a) else np.zeros(0, dtype=dt)

        return KinetoColumns(
            cat=arr(self.cat, np.int32), name=arr(self.name, np.int32), pid=arr(self.pid, np.int32),
            tid=arr(self.tid, np.int32), ts=arr(self.ts, np.float64), dur=arr(self.dur, np.float64),
            cats=[str(c) for c in self.cats.values], names=self.names.values, pids=self.pids.values,
            tids=self.tids.values,
            ints={k: arr(self.int_flat, np.int64).reshape(-1, len(INT_ARGS))[:, i]
                  for i, k in enumerate(INT_ARGS)},
            texts={k: arr(self.text_flat, np.int32).reshape(-1, len(TEXT_ARGS))[:, i]
                   for i, k in enumerate(TEXT_ARGS)},
            text_values=self.text_values.values,
            memory={k: arr(v, np.float64) for k, v in self.memory.items()}, processes=self.processes,
            threads=self.threads, meta=meta)


def _open(path: Path) -> IO[bytes]:
    f = open(path, "rb")  # noqa: SIM115 - returned to the caller, closed there
    if f.read(2) == b"\x1f\x8b":
        f.close()
        return cast("IO[bytes]", gzip.open(path, "rb"))
    f.seek(0)
    return f


class TraceFormatError(ValueError):
    """The file is not a Chrome/Kineto trace (the caller words the sentence)."""


def read_columns(path: Path | str, *, progress: Callable[[float], None] | None = None,
                 block: int = BLOCK) -> KinetoColumns:
    """Stream the trace at ``path`` into :class:`KinetoColumns`.

    Raises:
        TraceFormatError: no ``traceEvents`` array, or the JSON is broken or truncated.
        OSError: the file cannot be read.

    """
    path = Path(path)
    size = max(path.stat().st_size, 1)
    dec = json.JSONDecoder()
    b = _Builder()
    with _open(path) as f:
        text, done = _until_events(f, block)
        head = text[:text.index("[", _KEY.search(text).start()) + 1] if _KEY.search(text) else ""  # type: ignore[union-attr]
        i = len(head)
        raw = len(head.encode())
        tail_meta = ""
        while True:
            i = _WS.match(text, i).end()  # type: ignore[union-attr]
            if i < len(text) and text[i] == "]":
                tail_meta = text[i + 1:] + (f.read().decode("utf-8", "replace") if not done else "")
                break
            try:
                obj, j = dec.raw_decode(text, i)
            except json.JSONDecodeError as exc:
                if done:
                    raise TraceFormatError(f"the trace's JSON is broken or truncated ({exc.msg})") from exc
                more = f.read(block)
                done = not more
                raw += len(text[:i].encode()) if progress is not None else 0
                text = text[i:] + more.decode("utf-8", "replace")
                i = 0
                if progress is not None:
                    progress(min(raw / size, 1.0))
                continue
            b.add(obj)
            i = j
    meta = _meta(head, tail_meta)
    return b.columns(meta)


def _until_events(f: IO[bytes], block: int) -> tuple[str, bool]:
    """Read until the ``"traceEvents": [`` key is in the text (a few blocks at most)."""
    text = ""
    while True:
        more = f.read(block)
        text += more.decode("utf-8", "replace")
        if _KEY.search(text) or not more:
            if not _KEY.search(text):
                raise TraceFormatError("no traceEvents array")
            return text, not more


def _meta(head: str, tail: str) -> dict[str, Any]:
    """The top-level keys around the events: the head up to the array, the tail after it."""
    start = head.find("{")
    body = head[start + 1:head.rfind('"traceEvents"')].rstrip().rstrip(",")
    tail = tail.strip().lstrip(",").rstrip().rstrip("}")
    parts = [p for p in (body.strip(), tail.strip()) if p]
    try:
        out = json.loads("{" + ",".join(parts) + "}")
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}
