"""What a ``.ncu-rep`` result holds besides metrics, decoded from the file (see :mod:`.pb_results`).

Rule results (``RuleResult``: 1 identifier, 2 name, 3 body of items {1: message {1 text, 2 type,
4 title}, 8: focus metrics, 10: speedup {1 type, 2 value}}, 4 section), the NVTX state
(``NvtxState``: 1 domains {1 id, 2 name}, 2 threads {1 id, 2 push/pop domains {1 id, 3 ranges {1
name}}}, 3 start/end domains {1 id, 3 ranges {2 name}}, 4 the default domain) and the section
definitions (``ProfilerSection``), each with the calls of ``ncu_report``'s interface the reader
makes. Content this reader does not decode raises :class:`~engine.reports.ncu.pb_results.PbUnsupported`
(defined here).
"""

from __future__ import annotations

import functools
import struct
from typing import Any

from engine.reports.ncu.section_defs import accepts, arch_ranges
from engine.reports.ncu.wire import fields, text

# ncu_report's rule message types by the file's RuleResultMessageType (Ok, Warning, Error, Optimization).
_MESSAGE_TYPES = {0: 0, 1: 1, 2: 3, 3: 4, 4: 2}


class PbUnsupported(Exception):
    """The report holds something this reader does not decode (the wheel reads it instead)."""


def fields_all(b: bytes) -> list[tuple[int, Any]]:
    """Every field of a small message: (number, int | bytes | float); PbUnsupported if malformed."""
    try:
        return fields(b, floats=True)
    except (ValueError, struct.error) as exc:
        raise PbUnsupported(str(exc)) from exc


def _domain_ranges(domain: bytes, name_field: int) -> tuple[int, list[str]]:
    """(domain id, its ranges' names) of an NVTX domain message.

    Field 1 is the id, each field 3 a range whose name is field ``name_field`` (1 for push/pop
    ranges, 2 for start/end ones).
    """
    did, names = 0, []
    for g, w in fields_all(domain):
        if g == 1:
            did = w
        elif g == 3:
            names.append(next((text(x) for h, x in fields_all(w) if h == name_field), ""))
    return did, names


def rule_dicts(msgs: list[bytes]) -> list[dict[str, Any]]:
    """``rule_results_as_dicts()`` of the RuleResult messages (one dict a message item)."""
    out: list[dict[str, Any]] = []
    for msg in msgs:
        ident = name = section = ""
        items: list[list[tuple[int, Any]]] = []
        for f, v in fields_all(msg):
            if f == 1:
                ident = text(v)
            elif f == 2:
                name = text(v)
            elif f == 3 and isinstance(v, bytes):
                items.extend(fields_all(it) for g, it in fields_all(v) if g == 1 and isinstance(it, bytes))
            elif f == 4:
                section = text(v)
        base: dict[str, Any] = {"rule_identifier": ident, "name": name, "section_identifier": section}
        for item in items:  # one result a body item: its message (or an empty one), focus metrics, speedup
            cur = dict(base, rule_message={"title": "", "message": "", "type": 0})
            for g, v in item:
                if g == 1:
                    message = title = ""
                    mtype = 0
                    for h, w in fields_all(v):
                        if h == 1:
                            message = text(w)
                        elif h == 2:
                            mtype = _MESSAGE_TYPES.get(int(w), -1)
                            if mtype < 0:
                                raise PbUnsupported(f"rule message type {w}")
                        elif h == 4:
                            title = text(w)
                    cur["rule_message"] = {"title": title, "message": message, "type": mtype}
                elif g == 8:
                    fm: dict[str, Any] = {}
                    for h, w in fields_all(v):
                        if h == 2:
                            fm["name"] = text(w)
                        elif h == 3:
                            fm["value"] = w
                        elif h == 4:
                            fm["severity"] = w
                        elif h == 5:
                            fm["info"] = text(w)
                    cur.setdefault("focus_metrics", []).append(fm)
                elif g == 10:
                    est: dict[str, Any] = {"type": 0, "speedup": 0.0}
                    for h, w in fields_all(v):
                        if h == 1:
                            est["type"] = w
                        elif h == 2:
                            est["speedup"] = w
                    cur["speedup_estimation"] = est
            out.append(cur)
        # a rule without a message: ncu_report gives no result for it
    return out


def nvtx_state(msg: bytes, thread: int) -> PbNvtxState:
    """The NVTX state (``NvtxState``) seen from thread ``thread``."""
    names: dict[int, str] = {}
    push: dict[int, list[str]] = {}
    start: dict[int, list[str]] = {}
    default = 0
    for f, v in fields_all(msg):
        if f == 1:
            did, dname = 0, ""
            for g, w in fields_all(v):
                if g == 1:
                    did = w
                elif g == 2:
                    dname = text(w)
            names[did] = dname
        elif f == 2:
            tid, domains = -1, []
            for g, w in fields_all(v):
                if g == 1:
                    tid = w
                elif g == 2:
                    domains.append(w)
            if tid != thread:
                continue
            for d in domains:
                did, stack = _domain_ranges(d, 1)
                push.setdefault(did, []).extend(stack)
        elif f == 3:
            did, ranges = _domain_ranges(v, 2)
            start.setdefault(did, []).extend(ranges)
        elif f == 4:
            default = v
    ids = [default, *[d for d in names if d != default]]
    for d in [*push, *start]:
        if d not in ids:
            ids.append(d)
    return PbNvtxState({
        d: _NvtxDomain((names.get(d) or "<default domain>") if d == default else names.get(d, ""),
                       push.get(d, []), start.get(d, []))
        for d in ids
    })


class _NvtxDomain:
    def __init__(self, name: str, push: list[str], start: list[str]) -> None:
        self._name, self._push, self._start = name, push, start

    def name(self) -> str:
        """As ``ncu_report``'s ``_NvtxDomain.name``."""
        return self._name

    def push_pop_ranges(self) -> list[str]:
        """As ``ncu_report``'s ``_NvtxDomain.push_pop_ranges``."""
        return self._push

    def start_end_ranges(self) -> list[str]:
        """As ``ncu_report``'s ``_NvtxDomain.start_end_ranges``."""
        return self._start


class PbNvtxState:
    """``INvtxState``: the NVTX domains with the ranges open at the launch."""

    def __init__(self, domains: dict[int, _NvtxDomain]) -> None:
        self._domains = domains

    def domains(self) -> list[int]:
        """As ``ncu_report``'s ``INvtxState.domains``."""
        return list(self._domains)

    def domain_by_id(self, domain_id: int) -> _NvtxDomain:
        """As ``ncu_report``'s ``INvtxState.domain_by_id``."""
        return self._domains[domain_id]


class _SectionMetric:
    def __init__(self, name: str, label: str) -> None:
        self._name, self._label = name, label

    def name(self) -> str:
        """As ``ncu_report``'s ``_SectionMetric.name``."""
        return self._name

    def label(self) -> str:
        """As ``ncu_report``'s ``_SectionMetric.label``."""
        return self._label


# Body items whose metrics are a plain repeated ProfilerSectionMetric field: item field -> metrics field
# (table, bar chart, histogram, line chart, source metric table, instances table).
_BODY_METRICS = {1: 5, 2: 5, 3: 4, 4: 4, 7: 3, 9: 5}


def _metric_pairs(msgs: list[bytes], arch: int | None) -> list[_SectionMetric]:
    """(name, label) of ProfilerSectionMetric messages whose architecture filter (6) accepts ``arch``."""
    out = []
    for m in msgs:
        name = label = ""
        ranges: tuple[tuple[int | None, int | None], ...] = ()
        for f, v in fields_all(m):
            if f == 1:
                name = text(v)
            elif f == 2:
                label = text(v)
            elif f == 6 and isinstance(v, bytes):
                ranges = arch_ranges(v)
        if accepts(ranges, arch):
            out.append(_SectionMetric(name, label))
    return out


def _roofline_value(v: bytes, out: list[bytes]) -> None:
    """The metrics of a ProfilerSectionRooflineValue: 2 a metric, 3 {1 per-cycle metrics, 2 cycles/s}."""
    for f, w in fields_all(v):
        if f == 2 and isinstance(w, bytes):
            out.append(w)
        elif f == 3 and isinstance(w, bytes):
            for g, x in fields_all(w):
                if g in (1, 2) and isinstance(x, bytes):
                    out.append(x)


def _roofline(chart: bytes, out: list[bytes]) -> None:
    """The metrics of a roofline chart: 4 rooflines, 5 achieved values {1, 2}, 6 walls {1}."""
    for f, v in fields_all(chart):
        if f in (4, 5, 6) and isinstance(v, bytes):
            for g, w in fields_all(v):
                if (g in (1, 2) if f != 6 else g == 1) and isinstance(w, bytes):
                    _roofline_value(w, out)


def _body_items(item: bytes, out: list[bytes], arch: int | None) -> None:
    fields = fields_all(item)
    for f, v in fields:
        if f == 200 and isinstance(v, bytes) and not accepts(arch_ranges(v), arch):
            return  # the item's filter rejects this GPU
    for f, v in fields:
        if f == 5 and isinstance(v, bytes):  # a horizontal container: its items
            for g, w in fields_all(v):
                if g == 1 and isinstance(w, bytes):
                    _body_items(w, out, arch)
        elif f == 6 and isinstance(v, bytes):
            _roofline(v, out)
        elif f in _BODY_METRICS and isinstance(v, bytes):
            out.extend(w for g, w in fields_all(v) if g == _BODY_METRICS[f] and isinstance(w, bytes))


class PbSection:
    """``ISection`` as far as the reader asks: identifier, name, order, header and body metrics.

    Header and body metrics (tables, charts, containers, rooflines) are the stored definition's
    whose architecture filters accept the GPU. They serve the ``labels`` of the report only (no
    page prints them; the details page uses :class:`~engine.reports.ncu.section_defs.SectionDef`),
    and differ from ``ncu_report``'s in a few labels: it also drops metrics the result lacks and
    takes metric options (``tests/engine/reports/ncu_pb_compare.py`` compares the identifiers).
    """

    def __init__(self, msg: bytes, arch: int | None = None) -> None:
        self._arch = arch
        self._header_pairs: list[_SectionMetric] | None = None
        self._body_pairs: list[_SectionMetric] | None = None
        self._ident = self._name = ""
        self._order = 0
        header: list[bytes] = []
        body: list[bytes] = []
        for f, v in fields_all(msg):
            if f == 1:
                self._ident = text(v)
            elif f == 2:
                self._name = text(v)
            elif f == 3:
                self._order = int(v)
            elif f == 4 and isinstance(v, bytes):
                header.extend(w for g, w in fields_all(v) if g == 2 and isinstance(w, bytes))
            elif f == 5 and isinstance(v, bytes):
                for g, w in fields_all(v):
                    if g == 1 and isinstance(w, bytes):
                        _body_items(w, body, arch)
        self._header, self._body = header, body

    def identifier(self) -> str:
        """As ``ncu_report``'s ``ISection.identifier``."""
        return self._ident

    def name(self) -> str:
        """As ``ncu_report``'s ``ISection.name``."""
        return self._name

    def order(self) -> int:
        """As ``ncu_report``'s ``ISection.order``."""
        return self._order

    def header_metrics(self) -> list[_SectionMetric]:
        """As ``ncu_report``'s ``ISection.header_metrics``."""
        if self._header_pairs is None:
            self._header_pairs = _metric_pairs(self._header, self._arch)
        return self._header_pairs

    def body_metrics(self) -> list[_SectionMetric]:
        """As ``ncu_report``'s ``ISection.body_metrics``."""
        if self._body_pairs is None:
            self._body_pairs = _metric_pairs(self._body, self._arch)
        return self._body_pairs


@functools.lru_cache(maxsize=64)  # ~30 kB a definition; a report holds ~20
def section(msg: bytes, arch: int | None) -> PbSection:
    """The :class:`PbSection` of a stored definition (kernels of a report share theirs)."""
    return PbSection(msg, arch)
