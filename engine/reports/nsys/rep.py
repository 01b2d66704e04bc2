"""Turn an ``.nsys-rep`` into an SQLite export with the installed nsys, once, and cache it.

The cache lives in the user's cache directory, keyed by the report's content hash and the version of
the nsys that exported it, so re-opening a report costs a hash and a file open. The user's file is
only ever read; the export goes to a temporary name in the cache and is renamed into place.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from engine.system.errors import ReportError, ToolMissingError
from engine.system.tools import Tool, find_nsys

ProgressFn = Callable[[str, float | None], None]
REP_MAGIC = b"NVIDIA Tegra Profiler Report"
_VERSION_FIELD_RE = re.compile(rb"\x32([\x05-\x40])(20\d\d\.\d+\.\d+[0-9A-Za-z.\-]*)")


def is_nsys_rep(path: Path) -> bool:
    """True when the file starts with the .nsys-rep magic."""
    try:
        with path.open("rb") as fh:
            return fh.read(len(REP_MAGIC)) == REP_MAGIC
    except OSError:
        return False


def rep_writer_version(path: Path) -> str | None:
    """The Nsight Systems version that wrote an .nsys-rep (e.g. '2025.3.1.0'), if readable."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    for m in _VERSION_FIELD_RE.finditer(data):
        length = m.group(1)[0]
        text = m.group(2)
        if len(text) >= length:
            return text[:length].decode("ascii", "replace")
    m2 = re.search(rb"(20\d\d\.\d+\.\d+\.\d+)", data)
    return m2.group(1).decode() if m2 else None


def default_cache_dir() -> Path:
    """Where exported SQLite files are cached (``<cache root>/nsys-export``)."""
    from engine.system.cache import cache_root

    return cache_root() / "nsys-export"


def file_sha256(path: Path) -> str:
    """Content hash of a file (streamed)."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def export_argv(nsys: Path, rep: Path, out_sqlite: Path) -> list[str]:
    """The argv that exports ``rep`` to ``out_sqlite`` (pure; tested)."""
    return [
        str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true",
        "--output", str(out_sqlite), str(rep),
    ]


def _run_export(
    argv: list[str], timeout_s: float, progress: ProgressFn | None,
    cancel: threading.Event | None, log_path: Path,
) -> tuple[int, str]:
    """Run an export in its own process group; return (returncode, combined output)."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while True:
            try:
                rc = proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                elapsed = time.monotonic() - t0
                if progress:
                    progress(f"exporting with nsys ({elapsed:.0f} s)", None)
                if (cancel is not None and cancel.is_set()) or elapsed > timeout_s:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    if cancel is not None and cancel.is_set():
                        raise ReportError("The export was cancelled.") from None
                    raise ReportError(
                        f"nsys export did not finish within {timeout_s:.0f} s; try again with a "
                        "longer timeout or export by hand with `nsys export --type sqlite`."
                    ) from None
    return rc, log_path.read_text(errors="replace")


def export_to_cache(
    rep: Path,
    *,
    cache_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    nsys_tools: list[Tool] | None = None,
    progress: ProgressFn | None = None,
    cancel: threading.Event | None = None,
    timeout_s: float = 900.0,
) -> tuple[Path, Tool]:
    """Export ``rep`` to SQLite with the newest nsys that can read it; reuse a valid cached export.

    Returns:
        (path of the cached .sqlite, the nsys used).

    Raises:
        ToolMissingError: no nsys is installed, or none of them can read this report.
        ReportError: the export failed, timed out or was cancelled.

    """
    rep = Path(rep)
    cache_dir = cache_dir or default_cache_dir()
    tools = nsys_tools if nsys_tools is not None else find_nsys(env)
    writer = rep_writer_version(rep)
    if writer is None and rep.stat().st_size > 0:
        # Every complete .nsys-rep carries its writer's version; without it the file is cut short,
        # whether or not an nsys is installed (checked first, so the sentence does not depend on it).
        raise ReportError(
            f"{rep.name} has no Nsight Systems version record, so it is probably truncated or "
            "damaged; copy or record the report again."
        )
    written_by = f"Nsight Systems {writer}" if writer else "an unknown Nsight Systems version"
    if not tools:
        raise ToolMissingError(
            f"{rep.name} was written by {written_by} and needs an nsys of that version or newer "
            "to open; install Nsight Systems (or set NSYS=/path/to/nsys), or open its .sqlite "
            "export (`nsys export --type sqlite`)."
        )
    if progress:
        progress("hashing report", 0.0)
    digest = file_sha256(rep)
    cache_dir.mkdir(parents=True, exist_ok=True)
    failures: list[str] = []
    for tool in tools:
        key = f"{digest[:40]}-nsys{tool.version or 'unknown'}.sqlite"
        target = cache_dir / key
        if target.is_file() and target.stat().st_size > 0:
            if progress:
                progress("using cached export", 1.0)
            return target, tool
        fd, tmp_name = tempfile.mkstemp(prefix=".export-", suffix=".sqlite", dir=cache_dir)
        os.close(fd)
        tmp = Path(tmp_name)
        log_path = tmp.with_suffix(".log")
        try:
            rc, output = _run_export(
                export_argv(tool.path, rep, tmp), timeout_s, progress, cancel, log_path
            )
            if rc == 0 and tmp.is_file() and tmp.stat().st_size > 0:
                os.replace(tmp, target)
                if progress:
                    progress("export finished", 1.0)
                return target, tool
            last = [ln for ln in output.strip().splitlines() if ln.strip()]
            failures.append(f"nsys {tool.version} ({tool.path}): {last[-1] if last else f'exit {rc}'}")
        finally:
            for p in (tmp, log_path):
                p.unlink(missing_ok=True)
    detail = "; ".join(failures)
    if writer:
        raise ToolMissingError(
            f"{rep.name} was written by {written_by}, and no installed nsys could read it "
            f"({detail}); install Nsight Systems {writer} or newer (or set NSYS=/path/to/nsys), "
            "or open its .sqlite export instead."
        )
    raise ReportError(f"nsys could not export {rep.name} ({detail}); the file may be damaged.")
