"""The columns a Kineto (PyTorch profiler) trace is held in, and how decoded events become them.

:class:`KinetoColumns` keeps what the readers and analyses use: per complete event (``ph: "X"``) its
category, name, process and thread (codes into tables of distinct values), start and duration, and
the args that link and describe GPU work (:data:`INT_ARGS`, :data:`TEXT_ARGS`); the ``[memory]``
instant events; the process and thread names; and the document's other top-level keys.
:class:`ColumnBuilder` fills typed arrays from decoded events (one at a time, or a batch column by
column); :func:`merge` joins the columns of consecutive parts of one trace. Reading the file into
them is :mod:`engine.reports.kineto_stream`'s.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # (see kineto_stream: a dependency; the stdlib path works without it)
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

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
        self.text_by_json: dict[bytes, int] = {}  # a list arg's orjson bytes -> its text's code

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
            self.text_codes[t].fromlist(self._text_codes([v for _, v in kept]))
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

    def _text_codes(self, values: list[Any]) -> list[int]:
        """The codes of the values' texts (with no spaces), as :meth:`_args` gives each.

        Lists (shapes, grids, types) are looked up by their orjson bytes, and each one's text is made
        once (``str`` of a nested list is the slow part of a trace's read), in order of first use.
        """
        if orjson is None or set(map(type, values)) != {list}:
            return _codes_of(self.text_values, [v.replace(" ", "") if type(v) is str
                                                else str(v).replace(" ", "") for v in values])
        try:
            keys = list(map(orjson.dumps, values))
        except TypeError:  # an int past 64 bits
            return _codes_of(self.text_values, [str(v).replace(" ", "") for v in values])
        by_json = self.text_by_json
        try:
            return list(map(by_json.__getitem__, keys))
        except KeyError:
            out = []
            for key, v in zip(keys, values, strict=True):
                c = by_json.get(key)
                if c is None:
                    c = self.text_code(str(v).replace(" ", ""))
                    if b"null" not in key:  # (None, NaN and infinities all dump as null)
                        by_json[key] = c
                out.append(c)
            return out

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
