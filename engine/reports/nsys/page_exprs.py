"""The expressions the page reader (:mod:`engine.reports.nsys.pages`) evaluates itself.

``"col"``, ``"a" - "b"``, ``"col" % N``, ``"col" / N % M``, ``coalesce("a", "b", NULL, ...)`` and
``NULL``, with SQLite's integer semantics (a NULL operand gives NULL; integer division truncates
toward zero and ``%`` keeps the sign; a difference that overflows 64 bits is SQLite's, which makes it
a REAL). Anything else raises :class:`Unsupported`, and the caller asks SQLite.

Two more forms name what SQLite has no cheap integer for: ``rowid`` (the row's id) and
``texthash("col")``, a 63-bit hash of a TEXT or BLOB value's bytes (NULL stays NULL), which tells
the distinct texts of a column apart without reading them as strings (NVTX range names: 20M rows);
``texthash("col", "a", "b")`` mixes integer columns into it (a NULL as :data:`NULL`; never NULL):
one key per (text, a, b). :func:`text_hash` is the same of one row, for SQLite's path (a function
of that name).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]

_COL = r'"([A-Za-z_][A-Za-z0-9_]*)"'
_FORMS = [
    (re.compile(rf"^{_COL}$"), "col"),
    (re.compile(rf"^{_COL} - {_COL}$"), "sub"),
    (re.compile(rf"^{_COL} % (\d+)$"), "mod"),
    (re.compile(rf"^{_COL} / (\d+) % (\d+)$"), "divmod"),
]


#: the missing-value stand-in that the keyed text hash mixes in for NULL (the engine's)
NULL = -(2**62)
#: the key of the rows' ids among a batch's raw columns (no column is named with a "#")
ROWID = "#rowid"
#: the 64-bit constants of the text hash: a seed per byte length, then splitmix64's finaliser
SEED = 0x9E3779B97F4A7C15
M1, M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    x = ((x ^ (x >> 30)) * M1) & _MASK
    x = ((x ^ (x >> 27)) * M2) & _MASK
    return x ^ (x >> 31)


def text_hash(value: object, *ints: int | None) -> int | None:
    """The page reader's ``texthash`` of one value (str as UTF-8, bytes as they are; None: NULL).

    The value's bytes as big-endian 64-bit words, zero-padded: h = mix(length * seed + is_text),
    then h = mix(h ^ word) for each word; the top bit cleared (never the NULL stand-in).

    Raises:
        Unsupported: an integer or REAL value (SQLite compares those as numbers, not as text).

    """
    if value is None:
        return None if not ints else _keyed(NULL, ints)
    if isinstance(value, str):
        raw, is_text = value.encode(), 1
    elif isinstance(value, bytes):
        raw, is_text = value, 0
    else:
        raise Unsupported("a number in a text column")
    h = _mix((len(raw) * SEED + is_text) & _MASK)
    for k in range(0, len(raw), 8):
        h = _mix(h ^ int.from_bytes(raw[k:k + 8].ljust(8, b"\0"), "big"))
    return h >> 1 if not ints else _keyed(h >> 1, ints)


def _keyed(text: int, ints: tuple[int | None, ...]) -> int:
    """A text's hash with integers mixed in: x = mix(x ^ mix(v + k * seed)) for the k-th (from 1)."""
    x = text & _MASK
    for k, v in enumerate(ints, start=1):
        if isinstance(v, bool) or (v is not None and not isinstance(v, int)):
            raise Unsupported("a value that is not an integer in a key column")
        x = _mix(x ^ _mix(((NULL if v is None else v) + k * SEED) & _MASK))
    return x >> 1


class Unsupported(Exception):
    """The file, table or expression is outside what this reader handles: ask SQLite."""


def parse_expr(expr: str) -> tuple[str, list[str], list[int]]:
    """``(form, columns, constants)`` of a supported expression.

    Raises:
        Unsupported: any other expression.

    """
    text = expr.strip()
    if text.upper() == "NULL":
        return "null", [], []
    if text.lower() == "rowid":
        return "rowid", [], []
    m = re.match(rf"^texthash\({_COL}((?:, {_COL})*)\)$", text, re.IGNORECASE)
    if m:
        return "hash", [m.group(1), *re.findall(_COL, m.group(2) or "")], []
    m = re.match(r"^coalesce\((.*)\)$", text, re.IGNORECASE)
    if m:  # coalesce("a", "b", NULL, ...): the first operand that is not NULL
        items = [i.strip() for i in m.group(1).split(",")]
        cols = [i[1:-1] for i in items if re.fullmatch(_COL, i)]
        if not items or any(not re.fullmatch(_COL, i) and i.upper() != "NULL" for i in items):
            raise Unsupported(expr)
        return "coalesce", cols, []
    for rx, form in _FORMS:
        m = rx.match(text)
        if m:
            groups = list(m.groups())
            cols = [g for g in groups if not g.isdigit()]
            nums = [int(g) for g in groups if g.isdigit()]
            if any(n == 0 for n in nums):
                raise Unsupported(expr)
            return form, cols, nums
    raise Unsupported(expr)


def mixed(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """:func:`_mix` of each value (splitmix64's finaliser), for the page reader's arrays."""
    import numpy as np

    x = (x ^ (x >> np.uint64(30))) * np.uint64(M1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(M2)
    out: npt.NDArray[np.uint64] = x ^ (x >> np.uint64(31))
    return out


def _keys(text: Ints, ints: list[tuple[Ints, npt.NDArray[np.bool_] | None]]) -> Ints:
    """:func:`_keyed` of each row (the columns' values, NULL as :data:`NULL`)."""
    import numpy as np

    with np.errstate(over="ignore"):
        x = np.asarray(text, dtype=np.int64).view(np.uint64)
        for k, (v, isnull) in enumerate(ints, start=1):
            vals = np.where(isnull, NULL, v) if isnull is not None else np.asarray(v, dtype=np.int64)
            x = mixed(x ^ mixed(vals.astype(np.int64).view(np.uint64) + np.uint64(k * SEED & _MASK)))
    out: Ints = (x >> np.uint64(1)).astype(np.int64)
    return out


def evaluate(parsed: dict[str, tuple[str, list[str], list[int]]],
              got: dict[str, tuple[Ints, npt.NDArray[np.bool_] | None]], null: int) -> dict[str, Ints]:
    """The expressions over one batch's raw columns (NULL where any operand is NULL)."""
    import numpy as np

    out: dict[str, Ints] = {}
    rows = len(next(iter(got.values()))[0])
    for name, (form, cols, nums) in parsed.items():
        if form == "null" or (form == "coalesce" and not cols):
            out[name] = np.full(rows, null, dtype=np.int64)
            continue
        a, isnull = got[ROWID if form == "rowid" else cols[0].lower()]
        if form == "coalesce":
            v = a.copy()
            for c in cols[1:]:  # fill the NULLs left from the next operand
                if isnull is None or not isnull.any():
                    break
                b, bnull = got[c.lower()]
                v[isnull] = b[isnull]
                isnull = isnull & bnull if bnull is not None else None
        elif form == "hash" and len(cols) > 1:  # text hash and integers: one key, never NULL
            v = _keys(np.where(isnull, NULL, a) if isnull is not None else a,
                      [got[c.lower()] for c in cols[1:]])
            isnull = None
        elif form in ("col", "hash", "rowid"):  # a hashed column is read as its hashes
            v = a.copy() if isnull is not None and isnull.any() else a
        elif form == "sub":
            b, bnull = got[cols[1].lower()]
            v = a - b
            if (((a ^ b) & (a ^ v)) < 0).any():  # SQLite turns an overflow into a REAL
                raise Unsupported(f"{cols[0]} - {cols[1]} overflows 64 bits")
            if bnull is not None:
                isnull = bnull if isnull is None else isnull | bnull
        elif form == "mod":
            v = np.fmod(a, nums[0])
        else:  # "divmod": SQL integer division truncates toward zero, % keeps the sign
            v = np.fmod(np.abs(a) // nums[0] * np.sign(a), nums[1])
        if isnull is not None and isnull.any():
            v[isnull] = null
        out[name] = v
    return out
