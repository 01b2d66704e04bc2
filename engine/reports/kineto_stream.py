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

import codecs
import gc
import gzip
import json
import math
import re
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

try:  # parses a batch of events ~4x as fast as the C JSON decoder; the stdlib path reads them without it
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; tests set it to None
    orjson = None  # type: ignore[assignment]

BLOCK = 32 * 2**20
#: int args kept as columns (NULL: -1 << 62)
INT_ARGS = ("External id", "correlation", "device", "stream", "bytes", "context", "Sequence number",
            "Fwd thread id", "registers per thread", "shared memory", "In msg nelems")
#: text args kept as codes into a table of distinct texts: the value's text with no spaces ("" when
#: absent or empty)
TEXT_ARGS = ("grid", "block", "Input Dims", "Input type", "dtype")
NULL = -(1 << 62)
MEMORY_FIELDS = ("ts", "allocated", "reserved", "bytes", "device", "device_type")
_INT_INDEX = {k: i for i, k in enumerate(INT_ARGS)}
_TEXT_INDEX = {k: i for i, k in enumerate(TEXT_ARGS)}
_WANTED = frozenset(INT_ARGS) | frozenset(TEXT_ARGS)


def _to_int(v: Any) -> int:
    try:
        x = int(v)
    except (TypeError, ValueError, OverflowError):
        return NULL
    return x if -(2**63) <= x < 2**63 else NULL
_NUMBERS = frozenset((int, float))


def _codes_of(codes: Codes, values: list[Any]) -> list[int]:
    """The codes of ``values`` (new ones in order of first appearance, as :meth:`Codes.code` gives)."""
    index = codes.index
    try:
        return list(map(index.__getitem__, values))
    except KeyError:
        for v in values:
            if v not in index:
                codes.code(v)
        return list(map(index.__getitem__, values))


_WS = re.compile(r"[\s,]*")
#: where the events start: the "traceEvents" key's array, or a bare array of events (some writers)
_KEY = re.compile(r'"traceEvents"\s*:\s*\[|^\s*\[(?=\s*[{\]])')
_KEY_BYTES = re.compile(_KEY.pattern.encode())


class Codes:
    """Distinct values -> small integer codes, in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.values: list[Any] = []

    def code(self, v: Any) -> int:
        """The code of ``v`` (a new one the first time)."""
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
        origin_us: the earliest time any event records (inf: none); see :func:`time_origin`.

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
    origin_us: float = math.inf

    @property
    def n(self) -> int:
        """Complete events."""
        return len(self.ts)


def complete_origin(ts: Any, dur: Any) -> float:
    """The earliest start or end of complete events (a negative duration ends before it starts)."""
    if not len(ts):
        return math.inf
    lo = np.minimum(ts, ts + dur)
    lo = lo[np.isfinite(lo)]
    return float(lo.min()) if len(lo) else math.inf


def time_origin(cols: KinetoColumns) -> float:
    """The origin of every relative time (µs): the earliest time an event records, 0 when none does.

    Complete events count from the earlier of their start and end, instants, counters and flows
    from their ``ts``; metadata events (``ph: "M"``) are left out, as their ``ts`` is arbitrary.
    """
    return cols.origin_us if math.isfinite(cols.origin_us) else 0.0


class ColumnBuilder:
    """Events added one at a time (dicts), kept in growing typed arrays; see :class:`KinetoColumns`."""

    def __init__(self) -> None:
        self.cat, self.name, self.pid, self.tid = array("i"), array("i"), array("i"), array("i")
        self.ts, self.dur = array("d"), array("d")
        # the args, sparse: per arg, the rows that have it and its values (most events have few)
        self.int_rows, self.int_vals = [array("q") for _ in INT_ARGS], [array("q") for _ in INT_ARGS]
        self.text_rows, self.text_codes = [array("q") for _ in TEXT_ARGS], [array("i") for _ in TEXT_ARGS]
        self.cats, self.names, self.pids, self.tids, self.text_values = (Codes() for _ in range(5))
        self.text_values.code("")
        self.cat_code, self.name_code, self.pid_code, self.tid_code, self.text_code = (
            self.cats.code, self.names.code, self.pids.code, self.tids.code, self.text_values.code)
        self.memory = {k: array("d") for k in MEMORY_FIELDS}
        self.processes: list[tuple[Any, str]] = []
        self.threads: list[tuple[Any, Any, str]] = []
        self.lo = math.inf  # the earliest time of the events that are neither "X" nor "M"
        self.wanted: dict[tuple[str, ...], list[str]] = {}  # per layout of args, the keys kept

    def add(self, e: Any) -> None:
        """Add one decoded event (anything else is left out)."""
        if not isinstance(e, dict):
            return
        ph = e.get("ph")
        if ph == "X" and "ts" in e:
            self._complete(e)
            return
        if ph == "M":
            a = e.get("args") or {}
            if e.get("name") == "process_name":
                self.processes.append((e.get("pid"), str(a.get("name", ""))))
            elif e.get("name") == "thread_name":
                self.threads.append((e.get("pid"), e.get("tid"), str(a.get("name", ""))))
            return
        self.other_ts(e.get("ts"))
        if ph == "i" and e.get("name") == "[memory]":
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

    def add_batch(self, events: list[Any]) -> None:
        """Add a list of decoded events: what :meth:`add` does for each, complete ones column by column."""
        try:
            phs = [e.get("ph") for e in events]
        except AttributeError:  # not all dicts
            for e in events:
                self.add(e)
            return
        complete = [e for e, ph in zip(events, phs, strict=True) if ph == "X" and "ts" in e]
        if len(complete) < len(events):
            for e, ph in zip(events, phs, strict=True):
                if ph != "X":
                    self.add(e)
        ts = [e["ts"] for e in complete]
        dur = [e.get("dur", 0.0) or 0.0 for e in complete]
        if not (set(map(type, ts)) | set(map(type, dur))) <= _NUMBERS:  # strings, None, ...: one at a time
            for e in complete:
                self._complete(e)
            return
        row = len(self.ts)
        self.ts.fromlist(ts)
        self.dur.fromlist(dur)
        names = [e.get("name", "") for e in complete]
        if set(map(type, names)) - {str}:
            names = [str(n) for n in names]
        self.cat.fromlist(_codes_of(self.cats, [e.get("cat") for e in complete]))
        self.name.fromlist(_codes_of(self.names, names))
        self.pid.fromlist(_codes_of(self.pids, [e.get("pid") for e in complete]))
        self.tid.fromlist(_codes_of(self.tids, [e.get("tid") for e in complete]))
        self._args_batch(row, [e.get("args") for e in complete])

    def _args_batch(self, row: int, args: list[Any]) -> None:
        """Keep the column args of complete events ``row``, ``row + 1``, ...

        Grouped by their keys (a few layouts: Kineto writes the same keys for the same kind of event),
        then key by key.
        """
        groups: dict[tuple[str, ...], tuple[list[int], list[Any]]] = {}
        for r, a in enumerate(args, row):
            if not a:
                continue
            if type(a) is not dict:
                self._args(r, a)
                continue
            keys = tuple(a)
            g = groups.get(keys)
            if g is None:
                g = groups[keys] = ([], [])
            g[0].append(r)
            g[1].append(a)
        for keys, (rows, dicts) in groups.items():
            wanted = self.wanted.get(keys)
            if wanted is None:
                wanted = self.wanted[keys] = [k for k in keys if k in _WANTED]
            for k in wanted:
                self._arg_values(k, rows, [a[k] for a in dicts])

    def _arg_values(self, k: str, rows: list[int], values: list[Any]) -> None:
        """Keep arg ``k``'s ``values`` of complete events ``rows`` (as :meth:`_args` keeps each)."""
        i = _INT_INDEX.get(k)
        if i is None:
            t = _TEXT_INDEX[k]
            kept = [(r, v) for r, v in zip(rows, values, strict=True) if v]  # "" for an empty list
            self.text_rows[t].fromlist([r for r, _ in kept])
            self.text_codes[t].fromlist(
                _codes_of(self.text_values, [v.replace(" ", "") if type(v) is str else str(v).replace(" ", "")
                                             for _, v in kept]))
            return
        if set(map(type, values)) == {int}:
            vals = array("q")
            try:
                vals.fromlist(values)
            except OverflowError:
                pass
            else:
                self.int_rows[i].fromlist(rows)
                self.int_vals[i].extend(vals)
                return
        for r, v in zip(rows, values, strict=True):
            self._args(r, {k: v})

    def other_ts(self, value: Any) -> None:
        """Count the time of an event that is neither complete nor metadata in the time origin."""
        if value is None:
            return
        try:
            t = float(value)
        except (TypeError, ValueError):
            return
        if t < self.lo:  # NaN compares false: left out, as time_origin_us leaves it out
            self.lo = t

    def _complete(self, e: dict[str, Any]) -> None:
        try:
            ts = float(e["ts"])
            dur = float(e.get("dur", 0.0) or 0.0)
        except (TypeError, ValueError):
            return
        row = len(self.ts)
        self.ts.append(ts)
        self.dur.append(dur)
        self.cat.append(self.cat_code(e.get("cat")))
        self.name.append(self.name_code(str(e.get("name", ""))))
        self.pid.append(self.pid_code(e.get("pid")))
        self.tid.append(self.tid_code(e.get("tid")))
        a = e.get("args")
        if a:
            self._args(row, a)

    def _args(self, row: int, a: Any) -> None:
        """Keep the args of complete event ``row`` that are columns."""
        for k in _WANTED.intersection(a):  # the few kept args an event has (a set operation in C)
            v = a[k]
            i = _INT_INDEX.get(k)
            if i is not None:
                if type(v) is not int or not -(2**63) <= v < 2**63:
                    v = NULL if v is None else _to_int(v)
                    if v == NULL:
                        continue
                self.int_rows[i].append(row)
                self.int_vals[i].append(v)
            elif v:  # as the views show it: "" for an empty list
                t = _TEXT_INDEX[k]
                self.text_rows[t].append(row)
                self.text_codes[t].append(self.text_code(str(v).replace(" ", "")))

    def arrays(self) -> Iterator[tuple[str, Any]]:
        """The columns one at a time: cat, name, pid, tid, ts, dur, int.<i>, text.<i>, memory.<field>."""
        def arr(a: array[Any], dt: Any) -> Any:
            return np.frombuffer(a, dtype=dt) if len(a) else np.zeros(0, dtype=dt)

        def dense(rows: array[Any], vals: array[Any], fill: int, dt: Any) -> Any:
            out = np.full(len(self.ts), fill, dtype=dt)
            out[arr(rows, np.int64)] = arr(vals, dt)
            return out

        for name in ("cat", "name", "pid", "tid"):
            yield name, arr(getattr(self, name), np.int32)
        yield "ts", arr(self.ts, np.float64)
        yield "dur", arr(self.dur, np.float64)
        for i in range(len(INT_ARGS)):
            yield f"int.{i}", dense(self.int_rows[i], self.int_vals[i], NULL, np.int64)
        for i in range(len(TEXT_ARGS)):
            yield f"text.{i}", dense(self.text_rows[i], self.text_codes[i], 0, np.int32)
        for k, v in self.memory.items():
            yield f"memory.{k}", arr(v, np.float64)

    def tables(self, meta: dict[str, Any]) -> dict[str, Any]:
        """The small parts: distinct values, processes, threads, the document's keys and the origin."""
        ts = np.frombuffer(self.ts, dtype=np.float64) if len(self.ts) else np.zeros(0)
        dur = np.frombuffer(self.dur, dtype=np.float64) if len(self.dur) else np.zeros(0)
        return {"n": len(self.ts), "cats": [str(c) for c in self.cats.values], "names": self.names.values,
                "pids": self.pids.values, "tids": self.tids.values, "text_values": self.text_values.values,
                "processes": self.processes, "threads": self.threads, "meta": meta,
                "origin_us": min(self.lo, complete_origin(ts, dur))}

    def columns(self, meta: dict[str, Any]) -> KinetoColumns:
        """All the columns at once."""
        return columns_from(dict(self.arrays()), self.tables(meta))


def columns_from(arrays: dict[str, Any], tables: dict[str, Any]) -> KinetoColumns:
    """:class:`KinetoColumns` from the arrays named as :meth:`ColumnBuilder.arrays` names them."""
    return KinetoColumns(
        cat=arrays["cat"], name=arrays["name"], pid=arrays["pid"], tid=arrays["tid"], ts=arrays["ts"],
        dur=arrays["dur"], cats=tables["cats"], names=tables["names"], pids=tables["pids"],
        tids=tables["tids"], ints={k: arrays[f"int.{i}"] for i, k in enumerate(INT_ARGS)},
        texts={k: arrays[f"text.{i}"] for i, k in enumerate(TEXT_ARGS)}, text_values=tables["text_values"],
        memory={k: arrays[f"memory.{k}"] for k in MEMORY_FIELDS},
        processes=[tuple(p) for p in tables["processes"]],  # type: ignore[misc]
        threads=[tuple(t) for t in tables["threads"]],  # type: ignore[misc]
        meta=tables["meta"], origin_us=tables["origin_us"])


#: the array files of a trace's columns, as :meth:`ColumnBuilder.arrays` names them
ARRAY_NAMES = ("cat", "name", "pid", "tid", "ts", "dur", *(f"int.{i}" for i in range(len(INT_ARGS))),
               *(f"text.{i}" for i in range(len(TEXT_ARGS))), *(f"memory.{k}" for k in MEMORY_FIELDS))
#: the coded arrays and the table of distinct values each codes into
CODED = {"cat": "cats", "name": "names", "pid": "pids", "tid": "tids",
         **{f"text.{i}": "text_values" for i in range(len(TEXT_ARGS))}}


def _open(path: Path) -> IO[bytes]:
    f = open(path, "rb")  # noqa: SIM115 - returned to the caller, closed there
    if f.read(2) == b"\x1f\x8b":
        f.close()
        return cast("IO[bytes]", gzip.open(path, "rb"))
    f.seek(0)
    return f


class TraceFormatError(ValueError):
    """The file is not a Chrome/Kineto trace (the caller words the sentence)."""


class _Limited:
    """A binary file read from its position up to ``end`` (a worker's share of the events)."""

    def __init__(self, f: IO[bytes], end: int | None) -> None:
        self.f, self.left = f, (None if end is None else end - f.tell())

    def read(self, n: int = -1) -> bytes:
        if self.left is None:
            return self.f.read(n)
        n = self.left if n < 0 else min(n, self.left)
        data = self.f.read(n)
        self.left -= len(data)
        return data


def read_columns(path: Path | str, *, progress: Callable[[float], None] | None = None,
                 block: int = BLOCK, workers: int = 1) -> KinetoColumns:
    """Stream the trace at ``path`` into :class:`KinetoColumns`.

    ``workers`` > 1 splits a big uncompressed trace at event boundaries and reads the parts in
    that many processes (a 2-core machine reads twice as fast), merging their columns.

    Raises:
        TraceFormatError: no ``traceEvents`` array, or the JSON is broken or truncated.
        OSError: the file cannot be read.

    """
    path = Path(path)
    if workers > 1:
        parts = cuts(path, workers)
        if parts is not None:
            return _parallel(path, parts, block)
    return _read_range(path, 0, None, block, progress)


def _read_range(path: Path, start: int, end: int | None, block: int,
                progress: Callable[[float], None] | None = None) -> KinetoColumns:
    """The events from byte ``start`` (0: the document's start, with its head) up to ``end``."""
    b, meta = _fill(path, start, end, block, progress)
    return b.columns(meta)


def read_part_to_files(path: Path, start: int, end: int | None, folder: Path,
                       block: int = BLOCK) -> dict[str, Any]:
    """Read the events from byte ``start`` up to ``end`` and save their columns in ``folder``.

    One ``.npy`` file per column (named as :meth:`ColumnBuilder.arrays` names them), each made and
    written alone, so a worker's memory holds the builder and one column; returns the part's
    tables (:meth:`ColumnBuilder.tables`).
    """
    b, meta = _fill(path, start, end, block)
    folder.mkdir(parents=True, exist_ok=True)
    for name, arr in b.arrays():
        with open(folder / f"{name}.npy", "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
        del arr
    return b.tables(meta)


def _fill(path: Path, start: int, end: int | None, block: int,
          progress: Callable[[float], None] | None = None) -> tuple[ColumnBuilder, dict[str, Any]]:
    """The builder filled with the events from ``start`` up to ``end``, and the document's keys.

    The events are parsed a batch at a time by orjson where it is installed (``[`` + the events up to
    an event boundary + ``]``), the rest (the array's end, or the whole range after a batch orjson
    refuses) event by event by the C JSON decoder; the garbage collector is off meanwhile (the
    events are dicts: it would walk them all again and again, finding nothing to free).
    """
    size = max(path.stat().st_size, 1)
    b = ColumnBuilder()
    utf8 = codecs.getincrementaldecoder("utf-8")("replace")
    collecting = gc.isenabled()
    gc.disable()
    try:
        with _open(path) as raw_f:
            raw_f.seek(start)
            f = _Limited(raw_f, end)
            if start == 0:
                data, done = _until_events(f, block)
                m = _KEY_BYTES.search(data)
                head = data[:m.end()] if m else b""
            else:
                data, head = f.read(block), b""
                done = not data
            reading = _Reading(f, block, size, start + len(head), progress)
            data, i, done = _batches(b, reading, data, len(head), done)
            tail = _text_events(b, reading, utf8.decode(data[i:], final=done), done, utf8, end)
    finally:
        if collecting:
            gc.enable()
    return b, (_meta(head.decode("utf-8", "replace"), tail) if start == 0 or end is None else {})


@dataclass
class _Reading:
    """The file being read, its size and how far the reading is (for ``progress``)."""

    f: Any
    block: int
    size: int
    seen: int
    progress: Callable[[float], None] | None

    def more(self, used: int) -> bytes:
        """The next block, after ``used`` more bytes were parsed."""
        self.seen += used
        if self.progress is not None:
            self.progress(min(self.seen / self.size, 1.0))
        return cast("bytes", self.f.read(self.block))


#: about how many bytes of events orjson parses at once (~1,000 Kineto events: a batch of dicts
#: that stays in the CPU's caches)
BATCH = 256 * 2**10
#: where one event of the array ends and the next starts (checked: a batch is taken only when orjson
#: parses it, which it cannot if the cut fell inside a string or a nested object)
_NEXT_EVENT = re.compile(rb"\}\s*,\s*\{")
#: digits as "0", the rest as " ": 20 digits in a row (in ~10 ms per 100 MB, where a regex takes 0.8 s)
_DIGITS = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_LONG_NUMBER = b"0" * 20


def _batches(b: ColumnBuilder, reading: _Reading, data: bytes, i: int, done: bool) -> tuple[bytes, int, bool]:
    """Parse the events from ``data[i:]`` on in batches with orjson while it can.

    Returns where the rest begins (the data, its position, whether the file is read to the end):
    the last events and the array's end, or everything from the first batch orjson refused on.
    """
    if orjson is None:
        return data, i, done
    while True:
        m = _NEXT_EVENT.search(data, min(i + BATCH, len(data)))
        if m is None:
            if done:
                return data, i, done
            more = reading.more(i)
            data, i, done = data[i:] + more, 0, not more
            continue
        batch = b"[" + data[i:m.start() + 1] + b"]"
        try:
            if _LONG_NUMBER in batch.translate(_DIGITS):  # orjson makes an int past 64 bits a float
                raise orjson.JSONDecodeError("a long number", "", 0)
            events = orjson.loads(batch)
        except orjson.JSONDecodeError:  # NaN, bad UTF-8, ...: what json reads (the cut is checked too)
            try:
                events = json.loads(batch.decode("utf-8", "replace"))
            except json.JSONDecodeError:
                return data, i, done
        b.add_batch(events)
        i = m.end() - 1


def _text_events(b: ColumnBuilder, reading: _Reading, text: str, done: bool, utf8: Any,
                 end: int | None) -> str:
    """Decode the events in ``text`` and what follows one at a time; returns the text after the array."""
    dec = json.JSONDecoder()
    i = 0
    while True:
        i = _skip(text, i)
        if text.startswith(_FLOW, i):  # a flow arrow: only its time counts (the origin)
            j = text.find("}", i)
            m = _FLOW_TS.match(text, i, j)
            if j > 0 and m is not None:
                b.other_ts(m.group(1))
                i = j + 1
                continue
        if i < len(text) and text[i] == "]":
            return text[i + 1:] + ("" if done else utf8.decode(reading.f.read(), final=True))
        if i >= len(text) and done:
            if end is None:
                raise TraceFormatError("the trace's JSON is broken or truncated (no end of traceEvents)")
            return ""  # a worker's share ends between two events
        try:
            obj, j = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if done:
                raise TraceFormatError(f"the trace's JSON is broken or truncated ({exc.msg})") from exc
            more = reading.more(len(text[:i].encode()) if reading.progress is not None else 0)
            done = not more
            text = text[i:] + utf8.decode(more, final=done)
            i = 0
            continue
        b.add(obj)
        i = j


#: how Kineto starts a flow event (an arrow between a launch and its kernel, or forward and backward):
#: it has no nested object, so it ends at the first "}", and only its "ts" is kept
_FLOW = ('{\n    "ph": "s", ', '{\n    "ph": "f", ')
_FLOW_TS = re.compile(r'\{\n    "ph": "[sf]", "id": [^,{}]*, "pid": [^,{}]*, "tid": [^,{}]*, '
                      r'"ts": ([-+.\deE]+),')


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


#: where Kineto starts an event: "},\n  {\n    \"ph\"" (its own writer's layout)
_BOUNDARY = re.compile(rb'\n  \{\n    "ph"')


def cuts(path: Path, workers: int) -> list[int] | None:
    """Byte offsets splitting the events into ``workers`` parts; None if the file is not cut-able."""
    size = path.stat().st_size
    if size < 64 * 2**20:
        return None
    with open(path, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            return None
        out = [0]
        for k in range(1, workers):
            f.seek(size * k // workers)
            window = f.read(4 * 2**20)
            m = _BOUNDARY.search(window)
            if m is None:
                return None
            out.append(size * k // workers + m.start())
    return out + [size]


def _parallel(path: Path, cuts: list[int], block: int) -> KinetoColumns:
    from concurrent.futures import ProcessPoolExecutor

    parts = list(zip(cuts[:-1], cuts[1:], strict=True))
    with ProcessPoolExecutor(max_workers=len(parts)) as pool:
        futures = [pool.submit(_read_range, path, a, None if b == cuts[-1] else b, block) for a, b in parts]
        results = [fu.result() for fu in futures]
        del futures
    return merge(results)


def merge(parts: list[KinetoColumns]) -> KinetoColumns:
    """Columns of consecutive parts of one trace as one (codes remapped to the first part's tables).

    The parts' arrays are let go column by column as they are joined (the parts are used up): the
    memory peak is the parts and one joined column, not twice the columns.
    """
    tables = {k: Codes() for k in ("cats", "names", "pids", "tids", "text_values")}
    luts = [{t: np.array([tables[t].code(v) for v in getattr(p, t)] or [0], dtype=np.int32) for t in tables}
            for p in parts]

    def join(get: Callable[[KinetoColumns], Any], drop: Callable[[KinetoColumns], None],
             table: str | None = None) -> Any:
        pieces = []
        for p, lut in zip(parts, luts, strict=True):
            a = get(p)
            pieces.append(a if table is None else lut[table][a])
            drop(p)
        return np.concatenate(pieces)

    def attr(name: str, table: str | None = None) -> Any:
        return join(lambda p: getattr(p, name), lambda p: setattr(p, name, None), table)

    def item(field: str, key: str, table: str | None = None) -> Any:
        return join(lambda p: getattr(p, field)[key],
                    lambda p: getattr(p, field).__setitem__(key, None), table)

    first, last = parts[0], parts[-1]
    return KinetoColumns(
        cat=attr("cat", "cats"), name=attr("name", "names"), pid=attr("pid", "pids"), tid=attr("tid", "tids"),
        ts=attr("ts"), dur=attr("dur"), cats=[str(c) for c in tables["cats"].values],
        names=tables["names"].values, pids=tables["pids"].values, tids=tables["tids"].values,
        ints={k: item("ints", k) for k in INT_ARGS},
        texts={k: item("texts", k, "text_values") for k in TEXT_ARGS},
        text_values=tables["text_values"].values,
        memory={k: item("memory", k) for k in MEMORY_FIELDS},
        processes=[x for p in parts for x in p.processes], threads=[x for p in parts for x in p.threads],
        meta={**first.meta, **last.meta}, origin_us=min(p.origin_us for p in parts))


def _until_events(f: Any, block: int) -> tuple[bytes, bool]:
    """Read until the ``"traceEvents": [`` key is in the data (a few blocks at most)."""
    data = b""
    while True:
        more = f.read(block)
        data += more
        if _KEY_BYTES.search(data) or not more:
            if not _KEY_BYTES.search(data):
                try:  # the whole file is read by now
                    json.loads(data.decode("utf-8", "replace"))
                except json.JSONDecodeError as exc:
                    raise TraceFormatError(f"the trace's JSON is broken or truncated ({exc.msg})") from exc
                raise TraceFormatError("no traceEvents array")
            return data, not more


def _meta(head: str, tail: str) -> dict[str, Any]:
    """The top-level keys around the events: the head up to the array, the tail after it."""
    if head and '"traceEvents"' not in head:
        return {}  # a bare array of events (a worker's later part has no head: its tail counts)
    start = head.find("{")
    body = head[start + 1:head.rfind('"traceEvents"')].rstrip().rstrip(",")
    tail = tail.strip().lstrip(",").rstrip().rstrip("}")
    parts = [p for p in (body.strip(), tail.strip()) if p]
    try:
        out = json.loads("{" + ",".join(parts) + "}")
    except json.JSONDecodeError:
        return {}
    return out if isinstance(out, dict) else {}
