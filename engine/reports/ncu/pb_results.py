"""Our own reader of the profiling results in a ``.ncu-rep``: metric values, names, rules, NVTX.

A report is a chain of length-prefixed protobuf blocks (:mod:`engine.reports.ncu.section_defs`). A
result's header block (``BlockHeader``: 1 NumSources, 2 NumResults, 4 a string table, 5 the size of
the next block, 7 NumRangeResults) is followed by the result message. The string tables of all
header blocks, concatenated in file order, are the names metrics refer to by index.

A kernel result (``ProfileResult``) holds its names in fields 5 (mangled), 6 (function) and 7
(demangled), its metrics as repeated field 13, rule results as 19, the NVTX state as 21; a range
result (``RangeResult``) holds metrics in 4, rules in 20 and NVTX in 10. A metric
(``ProfileMetricResult``) is {1: name index, 2: value, 3: repeated instance {1: correlation id,
2: value, 3: sub-instance values}, 4: category}; a value is one of {1: string, 2: float, 3: double,
4: uint32, 5: uint64}.

:func:`read_results` gives one :class:`PbAction` per result, in file order, with the part of
``ncu_report``'s ``IAction`` / ``IMetric`` interface the reader uses (:mod:`engine.reports.ncu.actions`
works on either); metric units are not in the file and come from :mod:`engine.reports.ncu.unit_lookup`.
Anything this reader does not understand (another file format, a value field it does not know,
sub-instance values) raises :class:`PbUnsupported`: the caller then reads the report with
``ncu_report``, never with a guessed value.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from engine.reports.ncu.pb_parts import (
    PbNvtxState,
    PbSection,
    PbUnsupported,
    fields_all,
    nvtx_state,
    rule_dicts,
    section,
)
from engine.reports.ncu.wire import text, top_fields, varint

__all__ = ["PbAction", "PbMetric", "PbUnsupported", "read_results"]

#: The file format versions this reader was checked with (field 1 of the first block).
FORMATS = frozenset({7})

# ncu_report's IMetric value kinds (the numbers of its enum): by the value message's field.
KIND_NONE, KIND_STRING, KIND_FLOAT, KIND_DOUBLE, KIND_UINT32, KIND_UINT64 = 0, 2, 3, 4, 5, 6
_KINDS = {1: KIND_STRING, 2: KIND_FLOAT, 3: KIND_DOUBLE, 4: KIND_UINT32, 5: KIND_UINT64}
def _value(b: bytes, i: int, end: int) -> tuple[int, Any]:
    """(kind, value) of a ProfileMetricValue in ``b[i:end]`` ((KIND_NONE, None) when empty)."""
    kind: int = KIND_NONE
    val: Any = None
    while i < end:
        key = b[i]
        i += 1
        if key == 0x0A:  # 1: string
            n, i = varint(b, i)
            kind, val = KIND_STRING, b[i:i + n].decode("utf-8", "replace")
            i += n
        elif key == 0x15:  # 2: float
            kind, val = KIND_FLOAT, struct.unpack_from("<f", b, i)[0]
            i += 4
        elif key == 0x19:  # 3: double
            kind, val = KIND_DOUBLE, struct.unpack_from("<d", b, i)[0]
            i += 8
        elif key == 0x20:  # 4: uint32
            val, i = varint(b, i)
            kind = KIND_UINT32
        elif key == 0x28:  # 5: uint64
            val, i = varint(b, i)
            kind = KIND_UINT64
        else:
            raise PbUnsupported(f"metric value field key {key}")
    return kind, val


# One instance {1: {5: uint64 correlation id}, 2: {5: uint64 value}} (lengths checked by the caller).
_INSTANCE_UINT64 = re.compile(
    rb"\x1a([\x00-\x7f])\x0a([\x00-\x7f])\x28([\x80-\xff]{0,9}[\x00-\x7f])"
    rb"\x12([\x00-\x7f])\x28([\x80-\xff]{0,9}[\x00-\x7f])", re.S)


def _uvarint(x: bytes) -> int:
    if len(x) == 1:
        return x[0]
    v = shift = 0
    for c in x:
        v |= (c & 0x7F) << shift
        shift += 7
    return v


class PbInstances:
    """Instance values or correlation ids of an instanced metric (``as_uint64(i)``, ``as_double(i)``)."""

    __slots__ = ("values",)

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def num_instances(self) -> int:
        """As ``ncu_report``'s ``IMetric.num_instances``."""
        return len(self.values)

    def as_uint64(self, i: int) -> int:
        """As ``ncu_report``'s ``IMetric.as_uint64``."""
        v = self.values[i]
        return 0 if isinstance(v, str) or v is None else int(v)

    def as_double(self, i: int) -> float:
        """As ``ncu_report``'s ``IMetric.as_double``."""
        v = self.values[i]
        return 0.0 if isinstance(v, str) or v is None else float(v)

    def as_string(self, i: int) -> str:
        """As ``ncu_report``'s ``IMetric.as_string``."""
        return str(self.values[i])


class PbMetric:
    """One metric of a result, decoded on first use from its bytes in the result message.

    The value (and the kind) is decoded on first use; instances (stored after the value, one
    field each) only when asked for: their positions first (:meth:`num_instances`), each one's
    value and correlation id when read.
    """

    __slots__ = ("_b", "_start", "_end", "_kind", "_val", "_first", "_offs", "_inst", "_ids", "_name",
                 "_units")

    def __init__(self, name: str, b: bytes, start: int, end: int, units: dict[str, str]) -> None:
        self._name, self._b, self._start, self._end, self._units = name, b, start, end, units
        self._kind = -1
        self._val: Any = None
        self._first = -1  # where the first instance starts (-1: none)
        self._offs: list[int] | None = None  # where each instance starts
        self._inst: list[Any] | None = None
        self._ids: list[Any] | None = None

    def _decode(self) -> None:
        try:
            self._head()
        except (ValueError, IndexError, struct.error) as exc:
            raise PbUnsupported(f"metric {self._name}: {exc}") from exc

    def _head(self) -> None:
        """The value and kind; where the instances start (the kind of the first where no value)."""
        b, i, end = self._b, self._start, self._end
        kind, val = KIND_NONE, None
        while i < end:
            key = b[i]
            if key == 0x12:  # 2: value
                n = b[i + 1]
                if n < 0x80:
                    i += 2
                else:
                    n, i = varint(b, i + 1)
                kind, val = _value(b, i, i + n)
                i += n
            elif key == 0x1A:  # 3: the instances (the fields after them: only the category)
                self._first = i
                if kind == KIND_NONE:
                    kind = self._instance(i)[2]
                break
            elif key == 0x20:  # 4: category
                _, i = varint(b, i + 1)
            else:
                raise PbUnsupported(f"metric field key {key}")
        self._kind, self._val = kind, val

    def _instance(self, i: int) -> tuple[Any, Any, int, int]:
        """(correlation id or None, value, its kind, end) of the instance field at ``i``."""
        b = self._b
        n, j = varint(b, i + 1)
        stop = j + n
        cid = ev = None
        ek = KIND_NONE
        while j < stop:
            k2 = b[j]
            m, j = varint(b, j + 1)
            if k2 == 0x0A:
                cid = _value(b, j, j + m)[1]
            elif k2 == 0x12:
                ek, ev = _value(b, j, j + m)
            else:
                raise PbUnsupported("sub-instance values")
            j += m
        return cid, ev, ek, stop

    def _index(self) -> list[int]:
        """Where each instance starts (checked to be instance fields up to the category)."""
        if self._offs is not None:
            return self._offs
        if self._kind < 0:
            self._decode()
        offs: list[int] = []
        b, i, end = self._b, self._first, self._end
        try:
            while 0 <= i < end and b[i] == 0x1A:
                offs.append(i)
                n = b[i + 1]
                if n < 0x80:
                    i += 2 + n
                else:
                    n, j = varint(b, i + 1)
                    i = j + n
            while 0 <= i < end:  # what follows the instances: the category only
                if b[i] != 0x20:
                    raise PbUnsupported(f"metric {self._name}: a field after its instances")
                _, i = varint(b, i + 1)
        except IndexError as exc:
            raise PbUnsupported(f"metric {self._name}: {exc}") from exc
        self._offs = offs
        return offs

    def _all(self) -> None:
        """Every instance's value and correlation id."""
        if self._inst is not None or self._all_uint64():
            return
        inst: list[Any] = []
        ids: list[Any] = []
        try:
            for i in self._index():
                cid, ev, _, _ = self._instance(i)
                inst.append(ev)
                if cid is not None:
                    ids.append(cid)
        except (ValueError, IndexError, struct.error) as exc:
            raise PbUnsupported(f"metric {self._name}: {exc}") from exc
        if ids and len(ids) != len(inst):
            raise PbUnsupported("correlation ids on some instances only")
        self._inst, self._ids = inst, ids or None

    def _all_uint64(self) -> bool:
        """:meth:`_all` for the common shape (uint64 correlation ids and values), in one regex pass.

        Every instance must match (lengths checked) up to the category; else False (the general path).
        """
        if self._kind < 0:
            self._decode()
        b, pos, end = self._b, self._first, self._end
        if pos < 0:
            return False
        inst: list[Any] = []
        ids: list[Any] = []
        match = _INSTANCE_UINT64.match
        while pos < end:
            m = match(b, pos)
            if m is None:
                break
            total, ncid, cid, nval, val = m.groups()
            if ncid[0] != 1 + len(cid) or nval[0] != 1 + len(val) or total[0] != 6 + len(cid) + len(val):
                return False
            ids.append(_uvarint(cid))
            inst.append(_uvarint(val))
            pos = m.end()
        if pos < end and (b[pos] != 0x20 or varint(b, pos + 1)[1] != end):
            return False  # not every instance has this shape, or more follows: the general path
        self._offs = None
        self._inst, self._ids = inst, ids or None
        return True

    # The IMetric interface the reader uses.
    def name(self) -> str:
        """As ``ncu_report``'s ``IMetric.name``."""
        return self._name

    def kind(self) -> int:
        """As ``ncu_report``'s ``IMetric.kind``."""
        if self._kind < 0:
            self._decode()
        return self._kind

    def has_value(self) -> bool:
        """As ``ncu_report``'s ``IMetric.has_value``."""
        if self._kind < 0:
            self._decode()
        return self._val is not None

    def value(self) -> Any:
        """As ``ncu_report``'s ``IMetric.value``."""
        if self._kind < 0:
            self._decode()
        return self._val

    def as_string(self) -> str:
        """As ``ncu_report``'s ``IMetric.as_string``."""
        return str(self.value())

    def as_uint64(self, i: int | None = None) -> int:
        """As ``ncu_report``'s ``IMetric.as_uint64``."""
        if i is None:
            return int(self.value())
        v = self._at(i)
        return 0 if isinstance(v, str) or v is None else int(v)  # ncu_report: 0 for a string instance

    def as_double(self, i: int | None = None) -> float:
        """As ``ncu_report``'s ``IMetric.as_double``."""
        if i is None:
            return float(self.value())
        v = self._at(i)
        return 0.0 if isinstance(v, str) or v is None else float(v)

    def _at(self, i: int) -> Any:
        if self._inst is not None:
            return self._inst[i]
        try:
            return self._instance(self._index()[i])[1]
        except (ValueError, struct.error) as exc:
            raise PbUnsupported(f"metric {self._name}: {exc}") from exc

    def num_instances(self) -> int:
        """As ``ncu_report``'s ``IMetric.num_instances``."""
        if self._inst is not None:
            return len(self._inst)
        return len(self._index())  # 0 for a metric without instances

    def has_correlation_ids(self) -> bool:
        """As ``ncu_report``'s ``IMetric.has_correlation_ids``."""
        self._all()
        return self._ids is not None

    def correlation_ids(self) -> PbInstances | None:
        """As ``ncu_report``'s ``IMetric.correlation_ids``."""
        self._all()
        return PbInstances(self._ids) if self._ids is not None else None

    def unit(self) -> str:
        """As ``ncu_report``'s ``IMetric.unit``."""
        return self._units.get(self._name, "")


@dataclass
class PbAction:
    """One result of the report with the ``IAction`` calls the reader makes."""

    NameBase_FUNCTION = 0  # noqa: N815 - ncu_report's names
    NameBase_DEMANGLED = 1  # noqa: N815
    NameBase_MANGLED = 2  # noqa: N815
    WorkloadType_KERNEL = 0  # noqa: N815
    WorkloadType_RANGE = 1  # noqa: N815

    names: tuple[str, str, str]  # function, demangled, mangled
    metrics: dict[str, PbMetric]
    rules: list[dict[str, Any]]
    nvtx: PbNvtxState | None
    section_msgs: list[bytes]
    ranged: bool

    def name(self, base: int) -> str:
        """As ``ncu_report``'s ``IAction.name``."""
        return self.names[base]

    def metric_names(self) -> list[str]:
        """As ``ncu_report``'s ``IAction.metric_names``."""
        return sorted(self.metrics)

    def metric_by_name(self, name: str) -> PbMetric | None:
        """As ``ncu_report``'s ``IAction.metric_by_name``."""
        return self.metrics.get(name)

    def rule_results_as_dicts(self) -> list[dict[str, Any]]:
        """As ``ncu_report``'s ``IAction.rule_results_as_dicts``."""
        return self.rules

    def nvtx_state(self) -> PbNvtxState | None:
        """As ``ncu_report``'s ``IAction.nvtx_state``."""
        return self.nvtx

    def sections(self) -> list[PbSection]:
        """The sections profiled, by identifier (as ``ncu_report`` lists them)."""
        major = self.metrics.get("device__attribute_compute_capability_major")
        minor = self.metrics.get("device__attribute_compute_capability_minor")
        arch = None
        if major is not None and major.has_value():
            low = int(minor.value()) if minor is not None and minor.has_value() else 0
            arch = int(major.value()) * 10 + low
        secs: dict[str, PbSection] = {}
        for msg in self.section_msgs:
            sec = section(msg, arch)
            secs.setdefault(sec.identifier(), sec)
        return [secs[k] for k in sorted(secs)]

    def workload_type(self) -> int:
        """As ``ncu_report``'s ``IAction.workload_type``."""
        return self.WorkloadType_RANGE if self.ranged else self.WorkloadType_KERNEL


#: ProfileResult / RangeResult fields: (metrics, sections, rules, nvtx).
_KERNEL_FIELDS = (13, 17, 19, 21)
_RANGE_FIELDS = (4, 7, 20, 10)
#: The last field of each message in Nsight Compute 2025.3/2026.3's format: a later one is unknown here.
_KERNEL_LAST, _RANGE_LAST = 39, 23


def _action(b: bytes, strings: list[str], ranged: bool, units: dict[str, str]) -> PbAction:
    mf, sf, rf, nf = _RANGE_FIELDS if ranged else _KERNEL_FIELDS
    metrics: dict[str, PbMetric] = {}
    texts: dict[int, str] = {}
    rules: list[bytes] = []
    secs: list[bytes] = []
    nvtx: bytes | None = None
    thread = 0
    i, n = 0, len(b)
    last = _RANGE_LAST if ranged else _KERNEL_LAST
    while i < n:
        key, i = varint(b, i)
        f, wire = key >> 3, key & 7
        if f > last:
            raise PbUnsupported(f"result field {f}: written by a newer Nsight Compute")
        if wire == 0:
            v, i = varint(b, i)
            if f == 1:
                thread = v
        elif wire == 2:
            ln, i = varint(b, i)
            end = i + ln
            if f == mf:
                if b[i] != 0x08:
                    raise PbUnsupported("a metric without its name first")
                idx, j = varint(b, i + 1)
                name = strings[idx]
                # stored again (application replay: once a pass), the last one counts, as in ncu_report
                metrics[name] = PbMetric(name, b, j, end, units)
            elif f in (5, 6, 7, 31) and not ranged:
                texts[f] = b[i:end].decode("utf-8", "replace")
            elif f == sf:
                secs.append(b[i:end])
            elif f == rf:
                rules.append(b[i:end])
            elif f == nf:
                nvtx = b[i:end]
            i = end
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise PbUnsupported(f"wire type {wire}")
    if texts.get(31):
        raise PbUnsupported("a renamed kernel name")  # never seen written; ncu_report knows what it means
    if ranged:  # a range result has no names; ncu_report calls it "range"
        names = ("range", "range", "range")
    else:  # a kernel with C linkage has no demangled name: its function name
        names = (texts.get(6, ""), texts.get(7) or texts.get(6) or texts.get(5, ""), texts.get(5, ""))
    return PbAction(names, metrics, rule_dicts(rules), nvtx_state(nvtx, thread) if nvtx is not None else None,
                    secs, ranged)


def read_results(path: Path, units: dict[str, str] | None = None) -> list[PbAction]:
    """Every result of a report, in file order (see the module's description).

    ``units``: metric name -> unit (what :meth:`PbMetric.unit` answers; filled in later is fine).
    Reads the headers and the result blocks only (not the sources' binaries), with plain reads.

    Raises:
        PbUnsupported: Another file format, or content this reader does not decode.
    """
    units = {} if units is None else units
    with path.open("rb") as f:
        head = f.read(24)
        if head[:4] != b"NVR\x00" or len(head) < 10 or head[8] != 0x08 or varint(head, 9)[0] not in FORMATS:
            raise PbUnsupported("another report file format")
        try:
            return _walk(f, path.stat().st_size, units)
        except (ValueError, IndexError, UnicodeDecodeError, struct.error) as exc:
            raise PbUnsupported(str(exc)) from exc


def _blocks_of(f: BinaryIO, size: int) -> list[tuple[int, int]]:
    """(start, length) of each length-prefixed block after the 4-byte magic."""
    out: list[tuple[int, int]] = []
    pos = 4
    while pos + 4 <= size:
        f.seek(pos)
        (length,) = struct.unpack("<I", f.read(4))
        if pos + 4 + length > size:
            break
        out.append((pos + 4, length))
        pos += 4 + length
    return out


def _walk(f: BinaryIO, size: int, units: dict[str, str]) -> list[PbAction]:
    blocks = _blocks_of(f, size)
    strings: list[str] = []
    out: list[PbAction] = []
    payload = -1  # the block a header announced (not a header itself)
    for k, (start, length) in enumerate(blocks[:-1]):
        if k == payload or length > (1 << 24):
            continue
        f.seek(start)
        buf = f.read(length)
        try:
            head = top_fields(memoryview(buf), 0, length, frozenset({4}), last=9)
        except (ValueError, IndexError):
            continue
        nxt_start, nxt_len = blocks[k + 1]
        if head.get(5) != [nxt_len + 4]:
            continue  # not a header block (one says how long the block after it is)
        payload = k + 1
        for table in head.get(4, []):
            if isinstance(table, bytes):
                strings.extend(text(v) for f_, v in fields_all(table) if f_ == 1)
        if head.get(1) not in (None, [0]):
            continue  # the header of a source block
        kernels, ranges = head.get(2, [0])[0], head.get(7, [0])[0]
        if any(head.get(n, [0])[0] for n in (8, 9)):
            raise PbUnsupported("command list or graph results")
        if (kernels, ranges) not in ((1, 0), (0, 1)):
            continue
        f.seek(nxt_start)
        data = f.read(nxt_len)
        out.append(_action(data, strings, ranges == 1, units))
    return out
