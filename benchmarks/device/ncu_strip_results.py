"""Copy an ``.ncu-rep`` without its profiling results (what does ``ncu --import`` print for none?).

A report is ``NVR\\0`` and a chain of blocks, each a little-endian uint32 length and a protobuf
message. A result is two blocks: a small header (field 1 = 0, field 5 = the next block's length + 4)
and the result itself. Both are left out; every other block is copied as it is.

    python3 ncu_strip_results.py IN.ncu-rep OUT.ncu-rep
"""

from __future__ import annotations

import struct
import sys


def _varint(b: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def _head(b: bytes) -> dict[int, int]:
    """The varint fields 1-7 of a small message (a result header), or {} if it is not one."""
    out: dict[int, int] = {}
    i = 0
    try:
        while i < len(b):
            key, i = _varint(b, i)
            field, wire = key >> 3, key & 7
            if field > 7:
                break
            if wire == 0:
                out[field], i = _varint(b, i)
            elif wire == 2:
                n, i = _varint(b, i)
                i += n
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            else:
                return {}
    except IndexError:
        return {}
    return out


def main(src: str, dst: str) -> None:
    """Write ``dst``: ``src`` without the header and body blocks of its results."""
    data = open(src, "rb").read()
    blocks, pos = [], 4
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        blocks.append(data[pos + 4:pos + 4 + n])
        pos += 4 + n
    drop: set[int] = set()
    for k in range(len(blocks) - 1):
        if len(blocks[k]) < (1 << 24):
            head = _head(blocks[k])
            if head.get(1) == 0 and head.get(5) == len(blocks[k + 1]) + 4:
                drop.update((k, k + 1))
    with open(dst, "wb") as f:
        f.write(data[:4])
        for k, b in enumerate(blocks):
            if k not in drop:
                f.write(struct.pack("<I", len(b)) + b)
    print(f"{src}: {len(blocks)} blocks, {len(drop) // 2} results left out -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
