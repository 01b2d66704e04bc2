"""What happened in a session, in one word (the kind) and one sentence (the message).

:func:`classify` is a pure function of the exit status, the captured output and which files exist,
so every rule here is tested with recorded tool messages.
"""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.sessions.ncu_logs import explain_ncu_log


class OutcomeKind(str, enum.Enum):
    """How a session ended."""

    SUCCESS = "success"
    TOOL_ERROR = "tool_error"  # nsys/ncu failed for its own reasons
    PERMISSION = "permission"  # GPU counters (ERR_NVGPUCTRPERM) or perf events refused
    IMPORTER_FAILED = "importer_failed"  # nsys left a .qdstrm and we could not import it either
    CRASHED = "crashed"  # the profiled program died from a signal or exited nonzero
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    MISSING_TOOL = "missing_tool"
    SSH_ERROR = "ssh_error"
    OUTPUT_ERROR = "output_error"  # could not write logs/reports (read-only, disk full)
    INTERRUPTED = "interrupted"  # the runner itself died mid-run (found later by the store)

    @property
    def ok(self) -> bool:
        """True only for success."""
        return self is OutcomeKind.SUCCESS


@dataclass(frozen=True)
class Outcome:
    """The result of :func:`engine.sessions.runner.run_session`.

    Attributes:
        kind: How it ended.
        message: One sentence for the user (what happened, what to do).
        session_id: Key in the session store.
        session_dir: Folder with spec.json, session.log and the reports.
        returncode: The main process's exit status (negative: killed by that signal); None if it
            never started.
        duration_s: Wall time of the whole session.
        reports: Report files kept (.nsys-rep, .sqlite, .ncu-rep), existing on this machine.
        notes: Extra facts worth showing (e.g. "recovered from nsys's importer failure").
    """

    kind: OutcomeKind
    message: str
    session_id: str
    session_dir: Path
    returncode: int | None = None
    duration_s: float = 0.0
    reports: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True for success."""
        return self.kind.ok

    @property
    def log_path(self) -> Path:
        """The combined log of the session."""
        return self.session_dir / "session.log"


#: The sentence for refused GPU counters comes from ncu's log explanations, so ``kernelscope run`` and
#: ``kernelscope ncu`` say the same thing (root / CAP_SYS_ADMIN / NVreg_RestrictProfilingToAdminUsers=0).
PERM_FIX: str = explain_ncu_log("==ERROR== ERR_NVGPUCTRPERM") or "GPU performance counters were refused."
PARANOID_FIX = (
    "CPU sampling needs Linux perf events, which this machine refuses (kernel.perf_event_paranoid is too "
    "high); run `sudo sysctl kernel.perf_event_paranoid=2`, or profile with CPU sampling off "
    "(nsys sample=none, cpuctxsw=none)."
)
_NSYS_SIGNAL_RE = re.compile(r"terminated (?:by|with) signal (\d+)", re.I)
_NSYS_EXIT_RE = re.compile(r"(?:returned|exited with) non-zero (?:exit )?(?:code|status)[: ]+(-?\d+)", re.I)
_NCU_APP_ERR_RE = re.compile(r"==ERROR== The application returned an error code \((-?\d+)\)")
_NCU_SIGNAL_RE = re.compile(r"==ERROR== The application (?:was|terminated).{0,40}signal\D*(\d+)", re.I)


def signal_name(num: int) -> str:
    """``11`` -> ``SIGSEGV`` (or ``signal 11``)."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _last_error_line(output: str) -> str | None:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "==ERROR==" in ln or ln.lower().startswith(("error", "fatal")) or " error" in ln.lower():
            return ln.replace("==ERROR==", "").strip()
    return lines[-1] if lines else None


# Lines that nsys / ncu print themselves; what is left of stderr is the program's own.
_TOOL_LINE_RE = re.compile(
    r"^\s*(?:Collecting data|Generating |Generated:|Importer error|importer note|The target application|"
    r"WARNING|Warning:|Processing |Capture range|Exporting |\[\d+/\d+\]|==(?:PROF|WARNING|ERROR|INFO)==|"
    r"kernelscope|/\S+\.(?:qdstrm|nsys-rep|ncu-rep|sqlite)$)"
)
TAIL_LINES = 3


def program_error_tail(stderr_tail: Sequence[str], tool: str, n: int = TAIL_LINES) -> list[str]:
    """The program's last ``n`` stderr lines (the profiler's own lines left out), each at most 200 chars."""
    own = [ln.strip() for ln in stderr_tail
           if ln.strip() and (tool == "bench" or not _TOOL_LINE_RE.match(ln))]
    return [ln if len(ln) <= 200 else ln[:197] + "..." for ln in own[-n:]]


def crash_of(tool: str, returncode: int | None, output: str, profiled: bool = False) -> str | None:
    """How the profiled program died, in words (None if it did not).

    ``profiled``: nsys wrote a report or a .qdstrm, so it did its job and a nonzero exit status it
    returns without saying why is the program's own (nsys 2025 passes the program's status on).
    """
    if tool == "bench":
        if returncode is None or returncode == 0:
            return None
        if returncode < 0:
            return f"was killed by {signal_name(-returncode)}"
        if returncode > 128 and returncode - 128 in {s.value for s in signal.Signals}:
            return f"exited with status {returncode} (probably {signal_name(returncode - 128)})"
        return f"exited with status {returncode}"
    if tool == "nsys":
        m = _NSYS_SIGNAL_RE.search(output)
        if m:
            return f"was killed by {signal_name(int(m.group(1)))}"
        m = _NSYS_EXIT_RE.search(output)
        if m and int(m.group(1)) != 0:
            return f"exited with status {m.group(1)}"
        if profiled and returncode is not None and returncode > 0:
            return f"exited with status {returncode}"
        return None
    m = _NCU_SIGNAL_RE.search(output)
    if m:
        return f"was killed by {signal_name(int(m.group(1)))}"
    m = _NCU_APP_ERR_RE.search(output)
    if m and int(m.group(1)) != 0:
        return f"exited with status {m.group(1)}"
    return None


def classify(
    tool: str,
    returncode: int | None,
    output: str,
    *,
    killed: str | None = None,
    report_exists: bool = False,
    qdstrm_exists: bool = False,
    elapsed_s: float = 0.0,
    program: str = "the program",
    stderr_tail: Sequence[str] = (),
) -> tuple[OutcomeKind, str]:
    """Decide how a session ended from its exit status, output and files (pure; tested).

    Args:
        tool: ``bench``, ``nsys`` or ``ncu``.
        returncode: Exit status of the main process (None: never started).
        output: Its combined stdout and stderr.
        killed: ``"cancel"`` or ``"timeout"`` when the runner killed it.
        report_exists: The expected report file exists.
        qdstrm_exists: nsys left a ``.qdstrm`` (its import step failed).
        elapsed_s: How long it ran.
        program: The program's name for messages.
        stderr_tail: The last stderr lines; when the program failed, its own last lines are quoted.
    """
    if killed == "cancel":
        return OutcomeKind.CANCELLED, f"The session was cancelled after {elapsed_s:.0f} s; its log is kept."
    if killed == "timeout":
        return OutcomeKind.TIMEOUT, (
            f"{program} did not finish within the {elapsed_s:.0f} s timeout and was stopped; its log is kept "
            "(raise the timeout if it needs longer)."
        )
    if "ERR_NVGPUCTRPERM" in output:
        return OutcomeKind.PERMISSION, explain_ncu_log(output) or PERM_FIX
    if tool == "nsys" and not report_exists and "perf_event_paranoid" in output:
        return OutcomeKind.PERMISSION, PARANOID_FIX
    import_failed = tool == "nsys" and not report_exists and (qdstrm_exists or "Importer error" in output)
    crash = crash_of(tool, returncode, output, profiled=report_exists or qdstrm_exists)
    if crash:
        # The program's own failure is the story; nsys's import trouble is a side remark.
        kept = " (the report up to the crash is kept)" if report_exists else ""
        tail = program_error_tail(stderr_tail, tool)
        said = f"; its last error output: {' | '.join(tail)}" if tail else ""
        remark = (" (nsys's import step failed too; the .qdstrm is kept)" if import_failed else "")
        return OutcomeKind.CRASHED, f"{program} {crash}{kept}{said}{remark}; see session.log for its output."
    if import_failed:
        return OutcomeKind.IMPORTER_FAILED, (
            "nsys recorded the run but its import step failed and left a .qdstrm file; run Nsight Systems' "
            "QdstrmImporter -i NAME.qdstrm -o NAME.nsys-rep (set KERNELSCOPE_IMPORTER_LIBS to a folder with "
            "the libraries it lacks, e.g. libdw.so.1, and Kernelscope will do it)."
        )
    known = explain_ncu_log(output) if tool == "ncu" else None
    if known and (returncode != 0 or not report_exists):
        return OutcomeKind.TOOL_ERROR, known  # no kernels, unsupported GPU, no driver, unknown metric
    if returncode != 0 or (tool != "bench" and not report_exists):
        detail = _last_error_line(output)
        what = f"{tool} failed" if tool != "bench" else f"{program} failed"
        status = f"exit {returncode}" if returncode is not None else "it did not start"
        missing = "" if tool == "bench" or report_exists else " and wrote no report"
        return OutcomeKind.TOOL_ERROR, (
            f"{what} ({status}){missing}: {detail or 'no output'}; see session.log for details."
        )
    return OutcomeKind.SUCCESS, "The session finished."
