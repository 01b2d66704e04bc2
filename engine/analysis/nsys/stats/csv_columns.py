"""Vectorised CSV writing for trace reports with millions of rows, byte-identical to :mod:`.output`.

Formatting cell by cell in Python costs ~0.5 µs a cell: 10 s for a 400k-kernel ``cuda_gpu_trace``.
Here every column becomes a byte matrix (one row per CSV row: right-aligned digits, a sign, a
decimal point, or a categorical string) and a matrix of which bytes are present; the row's
matrices and separators are put side by side and the present bytes are taken in row-major order
(``matrix[mask]``), which is the CSV text. Numbers are written four digits at a time from a
lookup table. The last column may be long text (kernel names): it is appended to each row's
prefix with one ``bytes.join`` instead.

The number formats are those of :func:`engine.analysis.nsys.stats.output.to_csv`: integers
plain, fixed decimals rounded as ``'%.Nf'`` does on the double (exact binary ties away from zero),
an empty field for NULL, and text quoted as the csv module quotes it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pandas as pd

    from engine.analysis.nsys.stats.rendered import RenderedReport

_CHUNK = 131_072  # rows formatted at a time (bounded memory)


@dataclass
class IntColumn:
    """Integers; ``null`` marks empty fields."""

    values: npt.NDArray[np.int64]
    null: npt.NDArray[np.bool_] | None = None


@dataclass
class FixedColumn:
    """Doubles printed with ``decimals`` digits; NaN is an empty field."""

    values: npt.NDArray[np.float64]
    decimals: int


@dataclass
class TextColumn:
    """Categorical text: ``codes`` index ``labels``; a negative code is an empty field.

    ``plain``: the caller knows no label needs CSV quoting (digits and colons, say), so they
    are written as they are (no csv module call per label: a label per row stays cheap).
    """

    codes: npt.NDArray[np.int64]
    labels: Sequence[str]
    plain: bool = False


Column = IntColumn | FixedColumn | TextColumn


def _quoted(text: str) -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([text])
    return buf.getvalue().encode()


def _pairs() -> npt.NDArray[np.uint8]:
    import numpy as np

    digits = np.arange(100)
    return np.stack([48 + digits // 10, 48 + digits % 10], axis=1).astype(np.uint8)


_QUADS: npt.NDArray[np.uint8] | None = None


def _quads() -> npt.NDArray[np.uint8]:
    """The four ASCII digits of 0..9999, one row each (built once)."""
    global _QUADS
    if _QUADS is None:
        import numpy as np

        d = np.arange(10000)
        _QUADS = np.stack([48 + d // 1000, 48 + d // 100 % 10, 48 + d // 10 % 10, 48 + d % 10],
                          axis=1).astype(np.uint8)
    return _QUADS


def _digits(mag: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Right-aligned decimal digits of non-negative integers, and how many each has."""
    import numpy as np

    n = len(mag)
    top = int(mag.max()) if n else 0
    width = max(1, len(str(top)))
    powers = np.array([10**k for k in range(1, 19)], dtype=np.int64)
    count: npt.NDArray[np.int64] = np.searchsorted(powers, mag, side="right").astype(np.int64) + 1
    if top < 10**15:  # exact in doubles: floor(x / 10^4) and x - 10^4 q have no rounding error
        width += -width % 4  # four digits a step, from a 10000-row table
        mat = np.empty((n, width), dtype=np.uint8)
        quads = _quads()
        x = mag.astype(np.float64)
        for j in range(width // 4):
            q = np.floor(x / 10000.0)
            r = (x - 10000.0 * q).astype(np.intp)
            mat[:, width - 4 * j - 4: width - 4 * j] = quads[r]
            x = q
        return mat, count
    width += width % 2
    mat = np.empty((n, width), dtype=np.uint8)
    pairs = _pairs()
    xi = mag.copy()
    for j in range(width // 2):
        xi, ri = np.divmod(xi, 100)
        mat[:, width - 2 * j - 2: width - 2 * j] = pairs[ri]
    return mat, count


def _present(width: int, count: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Mask of the last ``count`` positions of each row of a ``width``-wide matrix."""
    import numpy as np

    return np.arange(width)[None, :] >= (width - count)[:, None]


def _int_parts(values: npt.NDArray[np.int64], null: npt.NDArray[np.bool_] | None,
               ) -> tuple[list[npt.NDArray[np.uint8]], list[npt.NDArray[np.bool_]]]:
    import numpy as np

    neg = values < 0
    mag = np.where(neg, -values, values) if neg.any() else values
    if null is not None:
        mag = np.where(null, 0, mag)
    mat, count = _digits(mag)
    mask = _present(mat.shape[1], count)
    mats, masks = [mat], [mask]
    if neg.any():
        mats.insert(0, np.full((len(values), 1), ord("-"), dtype=np.uint8))
        masks.insert(0, neg[:, None])
    if null is not None and null.any():
        masks = [m & ~null[:, None] for m in masks]
    return mats, masks


def _scaled(values: npt.NDArray[np.float64], decimals: int) -> npt.NDArray[np.int64]:
    """``values * 10**decimals`` rounded as ``'%.Nf'`` rounds the double (ties away from zero)."""
    import numpy as np

    scaled = np.abs(values) * 10.0**decimals
    out = np.rint(scaled)
    near = np.abs(scaled - np.floor(scaled) - 0.5) <= 1e-6 * np.maximum(1.0, scaled * 1e-9)
    q = Decimal(1).scaleb(-decimals)
    for i in np.flatnonzero(near).tolist():
        exact = Decimal(float(abs(values[i]))).quantize(q, rounding=ROUND_HALF_UP)
        out[i] = float(exact.scaleb(decimals))
    result: npt.NDArray[np.int64] = out.astype(np.int64)
    return result


def _fixed_parts(col: FixedColumn) -> tuple[list[npt.NDArray[np.uint8]], list[npt.NDArray[np.bool_]]]:
    import numpy as np

    v = col.values
    null = np.isnan(v)
    clean = np.where(null, 0.0, v)
    r = _scaled(clean, col.decimals)
    unit = 10**col.decimals
    whole, frac = np.divmod(r, unit)
    mats, masks = _int_parts(whole, None)
    n = len(v)
    neg = np.signbit(clean)
    if neg.any():  # '%.3f' prints -0.000 for -0.0001 and -0.0 too
        mats.insert(0, np.full((n, 1), ord("-"), dtype=np.uint8))
        masks.insert(0, neg[:, None])
    if col.decimals:
        frac_mat, _ = _digits(frac + unit)  # leading 1 keeps the zeros: 1xyz -> drop the 1
        frac_mat = frac_mat[:, frac_mat.shape[1] - col.decimals:]
        mats += [np.full((n, 1), ord("."), dtype=np.uint8), frac_mat]
        masks += [np.ones((n, 1), dtype=bool), np.ones((n, col.decimals), dtype=bool)]
    if null.any():
        masks = [m & ~null[:, None] for m in masks]
    return mats, masks


def _text_parts(col: TextColumn) -> tuple[list[npt.NDArray[np.uint8]], list[npt.NDArray[np.bool_]]]:
    import numpy as np

    enc = [s.encode() for s in col.labels] if col.plain else [_quoted(s) for s in col.labels]
    enc.append(b"")
    lengths = np.fromiter(map(len, enc), dtype=np.int64, count=len(enc))
    width = max(1, int(lengths.max()))
    table = np.zeros((len(enc), width), dtype=np.uint8)
    table[np.arange(width)[None, :] < lengths[:, None]] = np.frombuffer(b"".join(enc), dtype=np.uint8)
    codes = np.where(col.codes < 0, len(enc) - 1, col.codes)
    mask = np.arange(width)[None, :] < lengths[codes][:, None]
    return [table[codes]], [mask]


def to_csv_bytes(header: Sequence[str], cols: Sequence[Column]) -> bytes:
    """The CSV text (header and rows, LF line ends) of columns of equal length.

    Args:
        header: the column names.
        cols: one :data:`Column` per name; only the last may be long text.

    Returns:
        UTF-8 bytes, as :func:`engine.analysis.nsys.stats.output.to_csv` would print them.

    """
    out = [",".join(_quoted(h).decode() for h in header).encode() + b"\n"]
    n = len(_values(cols[0]))
    tail = cols[-1] if isinstance(cols[-1], TextColumn) else None
    if tail is not None and any("\n" in t for c in cols[:-1] if isinstance(c, TextColumn)
                                for t in c.labels):
        raise ValueError("a text column before the last one holds a newline")
    body = list(cols[:-1]) if tail is not None else list(cols)
    for lo in range(0, n, _CHUNK):
        out.append(_rows(body, lo, min(n, lo + _CHUNK), tail))
    return b"".join(out)


def _values(col: Column) -> npt.NDArray[np.generic]:
    return col.codes if isinstance(col, TextColumn) else col.values


#: A tail text column whose labels are at most this long (bytes, quoted) joins the byte matrix
#: like the others; longer ones (C++ template names run to kilobytes) are appended row by row.
_TAIL_IN_MATRIX = 256


def _rows(body: Sequence[Column], lo: int, hi: int, tail: TextColumn | None) -> bytes:
    """Rows lo..hi: the vectorised prefix, then the tail text (in the matrix when it is short)."""
    import numpy as np

    if tail is not None and body and all(len(_quoted(t)) <= _TAIL_IN_MATRIX for t in tail.labels):
        body, tail = [*body, tail], None
    n = hi - lo
    mats: list[npt.NDArray[np.uint8]] = []
    masks: list[npt.NDArray[np.bool_]] = []
    every = np.ones((n, 1), dtype=bool)
    for i, col in enumerate(body):
        if i:
            mats.append(np.full((n, 1), ord(","), dtype=np.uint8))
            masks.append(every)
        if isinstance(col, IntColumn):
            part = _int_parts(col.values[lo:hi], None if col.null is None else col.null[lo:hi])
        elif isinstance(col, FixedColumn):
            part = _fixed_parts(FixedColumn(col.values[lo:hi], col.decimals))
        else:
            part = _text_parts(TextColumn(col.codes[lo:hi], col.labels, col.plain))
        mats += part[0]
        masks += part[1]
    if tail is not None and body:
        mats.append(np.full((n, 1), ord(","), dtype=np.uint8))
        masks.append(every)
    mats.append(np.full((n, 1), ord("\n"), dtype=np.uint8))
    masks.append(every)
    blob = np.concatenate(mats, axis=1)[np.concatenate(masks, axis=1)].tobytes()
    if tail is None:
        return blob
    prefixes = blob.split(b"\n")[:n]
    enc = [_quoted(s) + b"\n" for s in tail.labels]
    names = [enc[c] if c >= 0 else b"\n" for c in tail.codes[lo:hi].tolist()]
    return b"".join(map(bytes.__add__, prefixes, names))


def columns_frame(cols: Sequence[Column], headers: Sequence[str]) -> pd.DataFrame:
    """The DataFrame of columns built for the CSV: Int64 (empty fields missing), floats, text."""
    import numpy as np
    import pandas as pd

    out: dict[str, Any] = {}
    for col, name in zip(cols, headers, strict=True):
        if isinstance(col, TextColumn):
            labels = np.array([*col.labels, None], dtype=object)
            codes = np.where(col.codes < 0, len(col.labels), col.codes)
            out[name] = pd.Series(labels[codes], dtype="object")
        elif isinstance(col, FixedColumn):
            out[name] = pd.Series(np.asarray(col.values, dtype=np.float64))
        else:
            null = col.null if col.null is not None else np.zeros(len(col.values), dtype=bool)
            out[name] = pd.arrays.IntegerArray(np.where(null, 0, col.values).astype(np.int64), null)
    return pd.DataFrame(out)


def streamed_csv(report: str, n_rows: int, columns_of: Callable[[int, int], list[Any]],
                 chunk: int = _CHUNK) -> RenderedReport:
    """A trace report's CSV: its header, then ``chunk`` rows at a time (``columns_of(lo, hi)``).

    The last column ``columns_of`` gives is the row's text tail (see :func:`_rows`).
    """
    from engine.analysis.nsys.stats.catalog import COLUMNS
    from engine.analysis.nsys.stats.rendered import RenderedReport

    def chunks() -> Iterator[bytes]:
        yield ",".join(_quoted(h).decode() for h in COLUMNS[report]).encode() + b"\n"
        for lo in range(0, n_rows, chunk):
            hi = min(lo + chunk, n_rows)
            cols = columns_of(lo, hi)
            yield _rows(cols[:-1], 0, hi - lo, cols[-1])

    return RenderedReport(report, n_rows, chunks)
