"""Read a ``.ncu-rep``: the decoders, tried in one ordered list (:data:`DECODERS`), first applicable wins.

1. ``cache``: the tables an earlier read cached on disk (:mod:`engine.reports.ncu.cache`).
2. ``own reader``: our reader of the file's protobuf blocks (:mod:`engine.reports.ncu.own_reader`),
   in this process; only the units come from NVIDIA's ``ncu_report`` (a child, once per kind of report).
3. ``ncu_report in child processes``: NVIDIA's ``ncu_report`` in short-lived children, a slice of
   the kernels each (:mod:`engine.reports.ncu.children`), for reports of many kernels.
4. ``ncu_report in this process``: always applies; a report it cannot read raises ReportError.

A decoder that does not apply raises :class:`Skip` with the reason (``use_cache=False``,
``KERNELSCOPE_NCU_OWN=0``, ``KERNELSCOPE_NCU_CHILDREN=0``, too few kernels, content our reader does
not decode, a child that failed, ...); the reasons are kept in :attr:`RepRead.skipped` and logged at
debug level. What the decoders share (the report's layout, the report opened in ``ncu_report``, the
kernels in ncu's order) is worked out once, by the first that needs it (:class:`RepRead`).

``ncu_report`` is imported only when it is needed. Through it, in this process, a report is first
read for the summary (:class:`LazyNcuReport`: the details page, rules, source counters and the
metrics the summary needs); the raw page and every other metric are decoded on first use. The other
decoders give complete tables. Input files are only ever opened for reading.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.reports.ncu import children, own_reader
from engine.reports.ncu.cache import cache_load, cache_store
from engine.reports.ncu.decode import ActionDecoder, is_range, settle_units
from engine.reports.ncu.kernel_names import simplify_names
from engine.reports.ncu.lazy_report import LazyNcuReport, NcuRows, Partial
from engine.reports.ncu.model import NcuReport
from engine.reports.ncu.nvidia_reader import import_ncu_report, open_action, open_report
from engine.reports.ncu.rep_file import (
    NoResultsError,
    check_file,
    newer_message,
    newer_than_reader,
    process_info,
    report_format_version,
    unreadable,
)
from engine.reports.ncu.section_defs import ReportLayout, read_report_layout
from engine.reports.ncu.sources import resolve_all_sources
from engine.system.errors import KernelscopeError, ReportError

_log = logging.getLogger(__name__)


class Skip(Exception):  # noqa: N818 - a reason, not an error: the next decoder is tried
    """A decoder does not apply to this read; the message says why."""


@dataclass
class RepRead:
    """One read of a ``.ncu-rep``: what was asked, and what the decoders share (each worked out once)."""

    path: Path
    use_cache: bool
    sources: bool
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (decoder, why it did not apply)

    @functools.cached_property
    def fmt(self) -> int | None:
        """The report's file format version (None: unreadable)."""
        return report_format_version(self.path)

    @functools.cached_property
    def layout(self) -> ReportLayout:
        """The section definitions, results and processes the file stores."""
        return read_report_layout(self.path)

    @functools.cached_property
    def newer(self) -> bool:
        """Whether a newer Nsight Compute than the installed ``ncu_report`` wrote the report."""
        return newer_than_reader(self.fmt, self.layout.ncu_version)

    def notes(self) -> list[str]:
        """The report's notes: a newer writer's warning, or none."""
        if self.newer:
            return [newer_message(self.path, self.fmt, self.layout.ncu_version, partly=True)]
        return []

    @functools.cached_property
    def opened(self) -> tuple[Any, list[tuple[int, int]]]:
        """The report open in ``ncu_report`` and its (range, action) refs in file order.

        Raises:
            ReportError: ``ncu-report`` is not installed, or cannot read the file.
        """
        ncu = import_ncu_report()
        try:
            ctx = open_report(self.path, ncu.load_report(str(self.path)))
            refs = [(i, j) for i in range(ctx.num_ranges()) for j in range(ctx.range_by_idx(i).num_actions())]
        except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
            raise unreadable(self.path, self.fmt, self.layout.ncu_version, self.newer, exc) from exc
        return ctx, refs

    @functools.cached_property
    def kernels(self) -> tuple[list[tuple[int, int]], list[tuple[str, str, str]], list[tuple[str, ...]]]:
        """(``ncu_report`` refs, processes, stored section lists), in the order ncu numbers the kernels.

        Raises:
            NoResultsError: The report holds no kernel ``ncu_report`` can read.
            ReportError: A newer Nsight Compute wrote it and ``ncu_report`` finds no kernel in it.
        """
        _ctx, refs = self.opened
        if not refs:
            if self.newer:
                raise ReportError(newer_message(self.path, self.fmt, self.layout.ncu_version))
            raise NoResultsError(
                f"{self.path} has no kernel that ncu_report can read: it is damaged or holds no profiled "
                "kernel; copy it again, or profile again and check the ncu filters."
            )
        order, processes, stored_sections = self.layout.kernel_order(len(refs), process_info(self.path))
        return [refs[i] for i in order], processes, stored_sections

    def finish(self, report: NcuReport) -> NcuReport:
        """A freshly decoded report, with its sources resolved if asked, cached unless told not to."""
        if self.sources:
            resolve_all_sources(report)
        if self.use_cache:
            cache_store(self.path, report)
        return report


def _from_cache(read: RepRead) -> NcuReport:
    """The tables an earlier read cached (keyed by the file's identity and the engine's code)."""
    if not read.use_cache:
        raise Skip("use_cache=False")
    cached = cache_load(read.path)
    if cached is None:
        raise Skip("no cached tables for this file and this engine code")
    if read.sources and resolve_all_sources(cached):
        cache_store(read.path, cached)
    return cached


def _own(read: RepRead) -> NcuReport:
    """Our own reader of the file's protobuf blocks, in this process (complete tables)."""
    if read.sources:
        raise Skip("sources=True: the SASS of the hottest instructions needs ncu_report's disassembler")
    if not own_reader.enabled():
        raise Skip("KERNELSCOPE_NCU_OWN=0")
    try:
        dec, refs, printed, stored = own_reader.decode_own(read.path, read.layout, process_info(read.path))
    except own_reader.NotDecoded as exc:
        raise Skip(str(exc)) from exc
    return read.finish(_report(read, dec, refs, printed, stored, None))


def _in_children(read: RepRead) -> NcuReport:
    """``ncu_report`` in child processes, a slice of the kernels each (complete tables, small parent)."""
    if not children.use_children():
        raise Skip("KERNELSCOPE_NCU_CHILDREN=0")
    _ctx, file_refs = read.opened
    if len(file_refs) < children.SPLIT_MIN:
        raise Skip(f"{len(file_refs)} kernels: fewer than {children.SPLIT_MIN} are decoded in this process")
    children.prespawn(read.path, file_refs, sources=read.sources)  # they decode while the layout is read
    refs, processes, stored_sections = read.kernels
    try:
        split = children.read_in_children(read.path, refs, processes, stored_sections, read.layout.sections,
                                          sources=read.sources)
    except KernelscopeError as exc:
        raise Skip(str(exc)) from exc
    dec, printed, stored, resolved = split
    return read.finish(_report(read, dec, refs, printed, stored, resolved))


def _in_process(read: RepRead) -> NcuReport:
    """``ncu_report`` in this process: the summary's metrics now, the rest on first use."""
    ctx, _file_refs = read.opened
    refs, processes, stored_sections = read.kernels
    try:
        actions = [open_action(ctx, ref) for ref in refs]
    except Exception as exc:  # noqa: BLE001 - the native reader's errors are not for people
        raise unreadable(read.path, read.fmt, read.layout.ncu_version, read.newer, exc) from exc
    dec = ActionDecoder(read.layout.sections)
    dec.settled = settle_units(actions)
    stored = [str(a.name(a.NameBase_DEMANGLED)) for a in actions]
    printed = simplify_names(stored)  # as ncu prints them: depends on the whole report
    dec.ranges = [is_range(a) for a in actions]
    for idx, a in enumerate(actions):
        dec.add(idx, a, processes[idx], stored_sections[idx], printed[idx], dec.ranges[idx])
    return read.finish(_report(read, dec, refs, printed, stored, None))


#: The decoders, in the order they are tried (see the module's description).
DECODERS: tuple[tuple[str, Callable[[RepRead], NcuReport]], ...] = (
    ("cache", _from_cache),
    ("own reader", _own),
    ("ncu_report in child processes", _in_children),
    ("ncu_report in this process", _in_process),
)


def read_ncu_rep(path: str | Path, *, use_cache: bool = True, sources: bool = False) -> NcuReport:
    """Read a ``.ncu-rep`` file into tables, with the first of :data:`DECODERS` that applies.

    Decoding a kernel in ``ncu_report`` costs about 0.1 s, so the tables are cached (pickled under
    the user cache directory, keyed by the file's identity and the engine's code); ``use_cache=False``
    neither reads nor writes the cache. A summary read in this process is lazy (a
    :class:`LazyNcuReport`): the cache entry is rewritten with the full tables once they are decoded.

    A report of :data:`~engine.reports.ncu.children.SPLIT_MIN` kernels or more is decoded by
    ``ncu_report`` in child processes, complete at once: ~130 MB of ``ncu_report`` memory per child
    instead of ~10 MB per kernel kept in this process.

    Args:
        path: The report file.
        use_cache: Read and write the on-disk cache.
        sources: Also disassemble every kernel's hottest instructions (:func:`resolve_all_sources`).

    Returns:
        The report's kernels, details-page metrics, raw-page metrics, numeric values, rules and
        hottest source lines.

    Raises:
        ReportError: The file is missing, a folder, empty, truncated or not an Nsight Compute report.
    """
    read = RepRead(Path(path), use_cache, sources)
    check_file(read.path)
    for name, decode in DECODERS:
        try:
            return decode(read)
        except Skip as why:
            read.skipped.append((name, str(why)))
            _log.debug("%s: %s skipped: %s", read.path, name, why)
    raise AssertionError("the last decoder always applies")  # pragma: no cover


def _report(read: RepRead, dec: ActionDecoder, refs: list[tuple[int, int]], printed_names: list[str],
            stored_names: list[str], resolved: dict[int, Any] | None) -> NcuReport:
    """The report from the decoded rows; complete (not lazy) when ``dec`` has every metric."""
    p, layout = read.path, read.layout
    rows = NcuRows(dec.kernels, dec.details, dec.rule_table, dec.source_table, dec.all_samples, dec.idents)
    partial = None
    if dec.full_rows:
        rows.full_rows, rows.full_units = dec.full_rows, dec.full_units
    else:
        st = p.stat()
        partial = Partial(dec.name_sets, dec.partial_nums, dec.raw_units, dec.idents, read.use_cache,
                          (st.st_size, st.st_mtime_ns))
    report = LazyNcuReport(
        rows, partial=partial, path=p, source="ncu-rep", notes=read.notes(), labels=dec.labels,
        sections=dec.sections, action_refs=refs, stored_names=stored_names,
        rule_columns=any(r.has_rule_results for r in layout.results), nvtx=dec.nvtx,
        launch_columns=not all(dec.ranges),
    )
    for kid, found in (resolved or {}).items():
        if found is not None:
            report.fill_sources(kid, found[0], found[1])
    return report
