"""Read a Kineto (PyTorch profiler) trace as a stream into columns, never as one dict per event.

``json.loads`` of a trace builds every event as a dict (about 6x the file in memory: 2.8 GB for a
461 MB trace). Here the file is read in blocks (gzip too), each event is decoded with the C JSON
decoder's ``raw_decode`` from the block, its fields go into typed columns at once and the event is
dropped, so memory holds one block and the columns.

The columns (:mod:`engine.reports.kineto_columns`) keep what the readers and analyses use: per
complete event (``ph: "X"``) its category, name, process and thread, start and duration, and the
args that link and describe GPU work (``External id``, ``correlation``, device, stream, bytes, grid,
block, registers, shared memory, ``Sequence number``, ``Input Dims`` / ``Input type``); the
``[memory]`` instant events; the process and thread names; and the document's other top-level keys
(``deviceProperties``, ...). Here: the file read into them, in one process or in parts (a big
trace cut at event boundaries, read by as many processes).
"""

from __future__ import annotations

import codecs
import gc
import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, cast

import numpy as np

from engine.reports.kineto_columns import ColumnBuilder, KinetoColumns, merge

try:  # parses a batch of events ~4x as fast as the C JSON decoder; the stdlib path reads them without it
    import orjson
except ImportError:  # pragma: no cover - orjson is a dependency; tests set it to None
    orjson = None  # type: ignore[assignment]

BLOCK = 32 * 2**20

_WS = re.compile(r"[\s,]*")
#: where the events start: the "traceEvents" key's array, or a bare array of events (some writers)
_KEY = re.compile(r'"traceEvents"\s*:\s*\[|^\s*\[(?=\s*[{\]])')
_KEY_BYTES = re.compile(_KEY.pattern.encode())


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
            if not more:
                data, i, done = data[i:], 0, True
                continue
            # the batch across the blocks' seam, then on in the new block (no copy of a whole block)
            seam = len(data) - i
            data, i = data[i:] + more[:BATCH], 0
            m = _NEXT_EVENT.search(data, min(BATCH, len(data)))
            if m is None or m.end() - 1 < seam:  # no boundary past the seam's first batch: join them
                data = data[:seam] + more
                continue
            batch = b"[" + data[:m.start() + 1] + b"]"
            rest = m.end() - 1 - seam  # where the next event starts in the new block
            if not _parse_batch(b, batch):
                return data[:seam] + more, 0, False
            reading.seen += seam  # (its bytes were parsed with the new block's first batch)
            data, i = more, rest
            continue
        batch = b"[" + data[i:m.start() + 1] + b"]"
        if not _parse_batch(b, batch):
            return data, i, done
        i = m.end() - 1


def _parse_batch(b: ColumnBuilder, batch: bytes) -> bool:
    """Add the events of ``batch`` (``[`` + events + ``]``); False when neither orjson nor json reads it."""
    try:
        if _LONG_NUMBER in batch.translate(_DIGITS):  # orjson makes an int past 64 bits a float
            raise orjson.JSONDecodeError("a long number", "", 0)
        events = orjson.loads(batch)
    except orjson.JSONDecodeError:  # NaN, bad UTF-8, ...: what json reads (the cut is checked too)
        try:
            events = json.loads(batch.decode("utf-8", "replace"))
        except json.JSONDecodeError:
            return False
    b.add_batch(events)
    return True


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
