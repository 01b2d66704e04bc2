"""Open any supported report by content (not by extension) and return a :class:`Trace`."""

from __future__ import annotations

import threading
from pathlib import Path

from engine.reports.base import ReportInfo, Trace, read_head
from engine.reports.nsys.rep import REP_MAGIC, ProgressFn, export_to_cache, rep_writer_version
from engine.system.errors import ReportError

SUPPORTED = (".nsys-rep, nsys .sqlite exports, PyTorch profiler .json/.json.gz traces and PyTorch memory "
             "snapshots (.pickle)")


def sniff_kind(path: Path) -> str:
    """Classify a file by its first bytes: 'nsys-rep', 'sqlite', 'json', 'ncu-rep', 'snapshot' or 'unknown'.

    Raises:
        ReportError: the path is missing, a directory, unreadable or empty.

    """
    path = Path(path)
    head = read_head(path, 64, folder_sentence="is a directory; give the path of a report file inside it.")
    if not head:
        raise ReportError(f"{path} is empty (0 bytes); the recording probably did not finish.")
    if head.startswith(REP_MAGIC):
        return "nsys-rep"
    if head.startswith(b"SQLite format 3\x00"):
        return "sqlite"
    if head[:2] == b"\x1f\x8b":
        return "json"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json"
    if path.suffix == ".ncu-rep" or head.startswith((b"NVIDIA Nsight Compute", b"NVR\x00")):
        return "ncu-rep"
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "snapshot"  # a pickle: PyTorch memory snapshots are the ones we read
    return "unknown"


def open_report(
    path: str | Path,
    *,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    ncu: bool = False,
) -> Trace:
    """Open an nsys report (.nsys-rep or .sqlite) or a Kineto trace.

    Args:
        path: the report file.
        progress: called with (message, fraction or None) during long steps (nsys export).
        cancel: set it to abandon a running export.
        ncu: also open Nsight Compute reports (.ncu-rep, ncu CSV exports) as an
            :class:`~engine.reports.ncu.NcuTrace` (the window lists them beside timelines);
            without it they are refused with a sentence pointing to ``kernelscope ncu``.

    Raises:
        ReportError: the file cannot be read, is not a supported report, or is damaged.
        ToolMissingError: an .nsys-rep needs an nsys that is not installed.

    """
    path = Path(path).expanduser()
    kind = sniff_kind(path)
    if kind == "sqlite":
        from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

        return NsysSqliteTrace(path)
    if kind == "nsys-rep":
        from engine.reports.nsys.sqlite_trace import NsysSqliteTrace

        sqlite_path, tool = export_to_cache(path, progress=progress, cancel=cancel)
        info = ReportInfo(path=path, kind="nsys-rep")
        trace = NsysSqliteTrace(sqlite_path, info)
        info.notes.append(
            f"exported by nsys {tool.version} from a report written by "
            f"{rep_writer_version(path) or 'unknown version'}"
        )
        return trace
    if kind == "json":
        from engine.reports.kineto import KinetoTrace

        return KinetoTrace(path)
    if kind == "snapshot":
        from engine.reports.torch_snapshot import SnapshotTrace

        return SnapshotTrace(path)
    if ncu and (kind == "ncu-rep" or (kind == "unknown" and path.suffix.lower() == ".csv")):
        from engine.reports.ncu import open_ncu

        return open_ncu(path)
    if kind == "ncu-rep":
        raise ReportError(
            f"{path} is an Nsight Compute report; open it with `kernelscope ncu` or the Kernels "
            "view, not as a timeline."
        )
    raise ReportError(f"{path} is not a report Kernelscope can read; it opens {SUPPORTED}.")
