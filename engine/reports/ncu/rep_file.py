"""What a ``.ncu-rep`` file says before any kernel is decoded.

Is it a complete report, its format, the Nsight Compute that wrote it against the installed
``ncu_report``, and its first process.

Each answer reads the file's first bytes or walks its block headers only; the decoders
(:mod:`engine.reports.ncu.decoders`) ask them before they decode.
"""

from __future__ import annotations

import struct
from pathlib import Path

from engine.reports.base import read_head
from engine.reports.ncu.section_defs import processes_in, version_tuple
from engine.system.errors import ReportError


class NoResultsError(ReportError):
    """A complete report that holds no profiling result (ncu wrote it, but nothing was profiled)."""


#: What ``ncu --import R --page details|raw`` (2025.3.1) prints, on stdout, for a report of no result.
NO_RESULTS_LINE = "==WARNING== No results are found in this report.\n"


def check_file(path: Path) -> None:
    """Raise ReportError unless ``path`` is a complete Nsight Compute report (cheap, reads headers)."""
    head = read_head(path, 4, folder_sentence="is a folder, not a report; give the path of a .ncu-rep file.",
                     unreadable_hint="; check the file and try again")
    size = path.stat().st_size
    if size == 0:
        raise ReportError(f"{path} is empty (0 bytes); profile again or copy the report again.")
    with path.open("rb") as f:
        if head != b"NVR\x00":
            raise ReportError(
                f"{path} is not an Nsight Compute report (.ncu-rep); open a file written by `ncu -o`."
            )
        # The report is a chain of length-prefixed blocks that must end exactly at the end of file.
        pos = 4
        while pos + 4 <= size:
            f.seek(pos)
            (length,) = struct.unpack("<I", f.read(4))
            pos += 4 + length
        if pos != size:
            raise ReportError(
                f"{path} is truncated or damaged ({size:,} bytes, its blocks end at {pos:,}); "
                "copy or record the report again."
            )


#: The newest report file format this code was checked with (Nsight Compute 2025.3 writes 7).
KNOWN_FORMAT = 7


def report_format_version(path: Path) -> int | None:
    """The format version in a report's first block (protobuf field 1), or None if unreadable."""
    with path.open("rb") as f:
        head = f.read(24)
    if len(head) < 10 or head[:4] != b"NVR\x00" or head[8] != 0x08:
        return None
    value, shift = 0, 0
    for b in head[9:19]:
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value
    return None


def newer_than_reader(fmt: int | None, ncu_version: str | None) -> bool:
    """Whether the report comes from a newer Nsight Compute than the installed ``ncu_report``.

    By the version in the report's own log (``Nsight Compute Target 2026.3.0.0``: its year and
    release against the wheel's), else by the file format number.
    """
    wrote = version_tuple(ncu_version)[:2]
    try:
        reader = version_tuple(_wheel_version())[:2]
    except Exception:  # noqa: BLE001 - no metadata: only the format number can tell
        reader = ()
    if wrote and reader:
        return wrote > reader
    return fmt is not None and fmt > KNOWN_FORMAT


def newer_message(p: Path, fmt: int | None, ncu_version: str | None = None, *, partly: bool = False) -> str:
    """What to do about a report written by a newer Nsight Compute (``partly``: it was read anyway)."""
    try:
        version = _wheel_version()
    except Exception:  # noqa: BLE001 - only decoration for the message
        version = "(installed)"
    verb = "may not read all of it" if partly else "cannot read it"
    wrote = version_tuple(ncu_version)
    if len(wrote) >= 2:
        need = f"{wrote[0]}.{wrote[1]}"
        return (
            f"{p} was written by Nsight Compute {ncu_version}, newer than the installed ncu-report "
            f"{version}, which {verb}; install ncu-report {need} or newer (`pip install -U "
            f"'ncu-report>={need}'`), or export it with that ncu (`ncu --import R --csv --page raw`) "
            "and open the CSV."
        )
    return (
        f"{p} was written by a newer Nsight Compute (report format {fmt}) and ncu-report {version} "
        f"{verb}; run `pip install -U ncu-report`, or export it with that ncu "
        "(`ncu --import R --csv --page raw`) and open the CSV."
    )


def _wheel_version() -> str:
    from importlib.metadata import version

    return version("ncu-report")


def process_info(path: Path) -> tuple[str, str, str]:
    """(process id, process name, host name) from the report's header block.

    ``ncu_report`` does not expose them; the header holds a small protobuf message
    {1: pid, 2: host, 3: executable path}. Reports of several processes get the first one.
    """
    with path.open("rb") as f:
        head = f.read(1 << 16)
    found: dict[int, tuple[str, str]] = {}
    processes_in(head, found)
    for pid, (exe, host) in found.items():
        return str(pid), exe, host
    return "", "", ""


def unreadable(p: Path, fmt: int | None, ncu_version: str | None, newer: bool,
               exc: Exception) -> ReportError:
    """The error for a report ``ncu_report`` failed on (``newer``: written by a newer Nsight Compute)."""
    if newer:
        return ReportError(newer_message(p, fmt, ncu_version))
    return ReportError(f"{p} could not be read by ncu_report ({exc}); record the report again.")
