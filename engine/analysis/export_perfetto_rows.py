"""Rows of trace-event JSON formatted a column at a time (no Python per row where pyarrow is there).

A row template is a list of pieces: literal strings and typed columns of one chunk of rows.

- ``("d", ints)``: a decimal integer.
- ``("us", ns)``: integer nanoseconds written as microseconds with exactly three decimals
  (``1500`` -> ``1.500``: the exact value, never a rounded float).
- ``("s", texts)``: text inserted as it is (an object array of already JSON-quoted strings).
- ``("v", vocab, codes)``: ``vocab.strings[codes]``, for columns with few distinct values (names,
  launch shapes): each distinct string is made once and looked up per row.

:func:`format_rows` joins the pieces element-wise; with pyarrow every step runs in C (integers cast
to text, nanoseconds to text as ``decimal128(20, 3)``, vocabularies by ``take``), without it one ``%``
template per row gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.system.arrays import distinct

try:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    ARROW = True
except ImportError:  # pragma: no cover - pyarrow is optional
    ARROW = False

if TYPE_CHECKING:
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]

#: A piece of a row template: a literal or a typed column (see the module docstring).
Piece = Any


class Vocab:
    """Distinct strings of a column with few values, keyed by an integer (an id, a packed shape).

    ``codes(keys)`` gives each key's index in :attr:`strings`, making the string of a key not seen
    before with ``make(key)``: small non-negative keys go through a dense table (one gather per
    chunk), others through ``np.unique`` per chunk.
    """

    def __init__(self, make: Callable[[int], str], dense_max: int = 1 << 24) -> None:
        self.make = make
        self.strings: list[str] = []
        self._index: dict[int, int] = {}
        self._lut = np.full(0, -1, dtype=np.int32)
        self._dense_max = dense_max
        self._arrow: Any = None

    def _add(self, keys: list[int]) -> list[int]:
        out = []
        for k in keys:
            code = self._index.get(k)
            if code is None:
                code = self._index[k] = len(self.strings)
                self.strings.append(self.make(k))
                self._arrow = None
            out.append(code)
        return out

    def codes(self, keys: Ints) -> npt.NDArray[np.int32]:
        """The code of every key (in ``strings``)."""
        keys = np.asarray(keys)
        if not len(keys):
            return np.zeros(0, dtype=np.int32)
        lo, hi = int(keys.min()), int(keys.max())
        if lo >= 0 and hi < self._dense_max:
            if hi >= len(self._lut):
                grown = np.full(max(hi + 1, 2 * len(self._lut)), -1, dtype=np.int32)
                grown[:len(self._lut)] = self._lut
                self._lut = grown
            got = self._lut[keys]
            if (got < 0).any():
                new = distinct(keys[got < 0])
                self._lut[new] = self._add(new.tolist())
                got = self._lut[keys]
            return got
        uniq, inv = np.unique(keys, return_inverse=True)
        return np.asarray(self._add(uniq.tolist()), dtype=np.int32)[inv.reshape(-1)]

    def arrow(self) -> Any:
        """The strings as a pyarrow array (made again only after new strings were added)."""
        if self._arrow is None:
            self._arrow = arrow_strings(self.strings)
        return self._arrow


def distinct_texts(joined: str, sep: str) -> tuple[Ints, list[str]]:
    """``joined.split(sep)`` as (a code per item, the distinct items in order of first appearance)."""
    if not ARROW:
        distinct: dict[str, int] = {}
        seen = [distinct.setdefault(t, len(distinct)) for t in joined.split(sep)]
        return np.asarray(seen, dtype=np.int64), list(distinct)
    buf = np.frombuffer(joined.encode(), dtype=np.uint8)
    cuts = np.flatnonzero(buf == ord(sep))  # UTF-8 never has an ASCII byte inside a character
    keep = np.ones(len(buf), dtype=bool)
    keep[cuts] = False
    n = len(cuts) + 1
    offsets = np.empty(n + 1, dtype=np.int64)  # each item's start, less the separators before it
    offsets[0] = 0
    offsets[1:-1] = cuts + 1 - np.arange(1, n)
    offsets[-1] = len(buf) - len(cuts)
    items = pa.Array.from_buffers(pa.large_string(), n,
                                  [None, pa.py_buffer(offsets), pa.py_buffer(buf[keep])])
    enc = pc.dictionary_encode(items)  # distinct items in order of first appearance, in C
    codes = np.frombuffer(enc.indices.buffers()[1], dtype=np.int32)[enc.indices.offset:enc.indices.offset + n]
    return codes.astype(np.int64), enc.dictionary.to_pylist()


def format_rows(pieces: list[Piece], n: int) -> bytes | memoryview:
    """The ``n`` rows of a template as UTF-8 text (every piece's column has ``n`` values)."""
    if n == 0:
        return b""
    return _arrow_rows(pieces, n) if ARROW else _python_rows(pieces, n).encode()


def _constant(v: Any) -> bool:
    return len(v) > 0 and bool(v[0] == v[-1]) and bool((v == v[0]).all())


# pyarrow arrays are made from numpy buffers, never with pa.array / pa.scalar: those import pandas
# (~0.3 s and ~40 MB) to check whether their argument is a pandas object.
def _ints(v: Any) -> Any:
    v = np.ascontiguousarray(v)
    if v.dtype not in (np.int64, np.int32):
        v = v.astype(np.int64)
    return pa.Array.from_buffers(pa.int64() if v.dtype == np.int64 else pa.int32(), len(v),
                                 [None, pa.py_buffer(v)])


def arrow_strings(texts: list[str] | Any) -> Any:
    """A pyarrow string array of ``texts`` (str objects)."""
    items = list(texts)
    data = "".join(items).encode()
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    if len(data) != int(lengths.sum()):  # not all ASCII: byte lengths
        lengths = np.fromiter((len(t.encode()) for t in items), dtype=np.int64, count=len(items))
    offsets = np.zeros(len(items) + 1, dtype=np.int32)  # a chunk's text is far below 2 GB
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(items), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


_LITERALS: dict[str, Any] = {}


def _literal(text: str) -> Any:
    got = _LITERALS.get(text)
    if got is None:
        if len(_LITERALS) > 4096:
            _LITERALS.clear()
        got = _LITERALS[text] = arrow_strings([text])[0]
    return got


_FRACTIONS: list[Any] = []


def _fractions() -> Any:
    """".000" to ".999" (the fractional microseconds of a nanosecond count)."""
    if not _FRACTIONS:
        _FRACTIONS.append(arrow_strings([f".{i:03d}" for i in range(1000)]))
    return _FRACTIONS[0]


def _arrow_rows(pieces: list[Piece], n: int) -> bytes | memoryview:
    cols: list[Any] = []
    made: dict[int, Any] = {}  # id of a column (alive in ``pieces``) -> its text

    def literal(s: str) -> None:
        if cols and isinstance(cols[-1], str):
            cols[-1] += s
        else:
            cols.append(s)

    for p in pieces:
        if isinstance(p, str):
            literal(p)
        elif p[0] == "d":
            v = np.asarray(p[1])
            if _constant(v):  # a pid, a stream: one value for the whole chunk
                literal(str(int(v[0])))
            else:  # a column given twice (a flow's id and correlationId) is cast once
                text = made.get(id(p[1])) or made.setdefault(id(p[1]), pc.cast(_ints(v), pa.string()))
                cols.append(text)
        elif p[0] == "us":
            cols += _us_text(np.asarray(p[1], dtype=np.int64))
        elif p[0] == "v":
            codes = np.asarray(p[2])
            if _constant(codes):
                literal(p[1].strings[int(codes[0])])
            else:
                cols.append(p[1].arrow().take(_ints(codes)))
        else:
            cols.append(arrow_strings(p[1]))
    if all(isinstance(c, str) for c in cols):
        return "".join(cols).encode() * n
    args = [_literal(c) if isinstance(c, str) else c for c in cols]
    joined = pc.binary_join_element_wise(*args, _literal(""))
    if isinstance(joined, pa.ChunkedArray):
        joined = joined.combine_chunks()
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32 if joined.type == pa.string() else np.int64)
    lo, hi = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
    return memoryview(joined.buffers()[2])[lo:hi]  # no copy: the writer thread reads it


def _us_text(v: Ints) -> list[Any]:
    """Nanoseconds as microsecond text with three decimals, as one or two string columns."""
    if len(v) and int(v.min()) >= 0:  # whole microseconds, then ".fff" looked up
        return [pc.cast(_ints(v // 1000), pa.string()), _fractions().take(_ints(v % 1000))]
    two = np.empty((len(v), 2), dtype=np.int64)  # a decimal128 of scale 3: low 64 bits, sign
    two[:, 0] = v
    two[:, 1] = v >> 63
    dec = pa.Array.from_buffers(pa.decimal128(20, 3), len(v), [None, pa.py_buffer(two)])
    return [pc.cast(dec, pa.string())]


def _python_rows(pieces: list[Piece], n: int) -> str:
    """The rows with one ``%`` template per row (where pyarrow is not installed): the same bytes."""
    fmt: list[str] = []
    cols: list[list[Any]] = []
    for p in pieces:
        if isinstance(p, str):
            fmt.append(p.replace("%", "%%"))
        elif p[0] == "d":
            fmt.append("%d")
            cols.append(np.asarray(p[1]).tolist())
        elif p[0] == "us":
            v = np.asarray(p[1], dtype=np.int64)
            a = np.abs(v)
            fmt.append("%s%d.%03d")
            cols += [np.where(v < 0, "-", "").tolist(), (a // 1000).tolist(), (a % 1000).tolist()]
        elif p[0] == "v":
            fmt.append("%s")
            cols.append(np.asarray(p[1].strings, dtype=object)[np.asarray(p[2])].tolist())
        else:
            fmt.append("%s")
            cols.append(list(p[1]))
    tmpl = "".join(fmt)
    if not cols:
        return tmpl % () * n
    return "".join(tmpl % t for t in zip(*cols, strict=True))
