"""The protobuf wire format of ``.ncu-rep`` blocks: varints, a message's top-level fields, text.

A ``.ncu-rep`` is a 4-byte magic, then a chain of length-prefixed blocks, each a protobuf message.
These are the primitives every reader of the package decodes them with
(:mod:`~engine.reports.ncu.section_defs`, :mod:`~engine.reports.ncu.pb_results`,
:mod:`~engine.reports.ncu.pb_parts`); they know nothing of what the fields mean.
"""

from __future__ import annotations

import struct
from typing import Any


def varint(b: bytes | memoryview, i: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``b[i]``."""
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b: bytes | memoryview, floats: bool = False) -> list[tuple[int, Any]]:
    """The top-level fields of a protobuf message: (field number, int or bytes).

    With ``floats``, fixed64 and fixed32 fields too, as the double and float they hold (else they
    are skipped).

    Raises:
        ValueError: a truncated field or an unknown wire type.

    """
    out: list[tuple[int, Any]] = []
    i, n = 0, len(b)
    while i < n:
        key, i = varint(b, i)
        f, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(b, i)
            out.append((f, v))
        elif wire == 2:
            ln, i = varint(b, i)
            if i + ln > n:
                raise ValueError("truncated field")
            out.append((f, bytes(b[i:i + ln])))
            i += ln
        elif wire == 1:
            if floats:
                out.append((f, struct.unpack_from("<d", b, i)[0]))
            i += 8
        elif wire == 5:
            if floats:
                out.append((f, struct.unpack_from("<f", b, i)[0]))
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def text(v: object) -> str:
    """A length-delimited field as text (UTF-8, bad bytes replaced); "" for any other value."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ""


def blocks(view: memoryview) -> list[tuple[int, int]]:
    """(start, length) of each complete length-prefixed block after the 4-byte magic."""
    size, pos, out = len(view), 4, []
    while pos + 4 <= size:
        (length,) = struct.unpack_from("<I", view, pos)
        if pos + 4 + length > size:
            break
        out.append((pos + 4, length))
        pos += 4 + length
    return out


def top_fields(
    view: memoryview, start: int, end: int, want: frozenset[int], last: int = 1 << 29
) -> dict[int, list[int | bytes]]:
    """Top-level fields of the message in ``view[start:end]``: varints of any field, bytes of ``want``.

    Stops at the first field numbered above ``last`` (messages are written in field order).
    """
    out: dict[int, list[int | bytes]] = {}
    i = start
    while i < end:
        key, i = varint(view, i)
        f, wire = key >> 3, key & 7
        if f > last:
            break
        if wire == 0:
            v, i = varint(view, i)
            out.setdefault(f, []).append(v)
        elif wire == 2:
            ln, i = varint(view, i)
            if i + ln > end:
                raise ValueError("truncated field")
            out.setdefault(f, []).append(bytes(view[i:i + ln]) if f in want else b"")
            i += ln
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
    return out
