"""Running one step of a session as a process group: its log lines, progress, watchdog and kill.

Shared by the local runner (:mod:`engine.sessions.runner`) and the SSH runner
(:mod:`engine.sessions.remote_run`).
"""

from __future__ import annotations

import collections
import errno
import os
import queue
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from engine.sessions.launchers import rank_names
from engine.sessions.outcome import OutcomeKind, classify
from engine.sessions.spec import SessionSpec
from engine.system.errors import KernelscopeError

KILL_GRACE_S = 3.0
STDERR_TAIL_LINES = 40  # kept per step for the outcome's 'last error lines'


PROGRESS_INTERVAL_S = 0.5


# Local watchdog, one per step, in its own session: it blocks reading a pipe whose write end only the
# runner holds. The runner writes "done" when the step is over; end-of-file without it means the runner
# died, and the step's process group gets SIGTERM, then SIGKILL after the grace period. (Chosen over
# prctl(PR_SET_PDEATHSIG) in a preexec_fn: that reaches only the direct child, not the program under
# nsys/ncu, fires when the *thread* that started it ends, and preexec_fn is unsafe with threads.)
WATCHDOG = (
    'IFS= read -r line; [ "$line" = done ] && exit 0; '
    f'kill -TERM -"$1" 2>/dev/null || exit 0; sleep {KILL_GRACE_S:g}; kill -KILL -"$1" 2>/dev/null; exit 0'
)


class OutputError(KernelscopeError):
    """The session folder cannot be created or written."""


@dataclass(frozen=True)
class Progress:
    """A progress estimate.

    Attributes:
        phase: What is happening, in words (``collecting``, ``importing``, ``profiled 3 kernel launch(es)``).
        fraction: Done so far in [0, 1], when it can be estimated.
        elapsed_s: Seconds since the session started (None when not known to the producer).
        expected_s: How long the same command took last time (None: no earlier run).
    """

    phase: str
    fraction: float | None = None
    elapsed_s: float | None = None
    expected_s: float | None = None


@dataclass(frozen=True)
class LogLine:
    """One line of output.

    Attributes:
        stream: ``stdout``, ``stderr`` or ``kernelscope`` (our own steps).
        text: The line without its newline.
        elapsed_s: Seconds since the session started.
        progress: The estimate after this line.
    """

    stream: str
    text: str
    elapsed_s: float
    progress: Progress


_NCU_PROFILING_RE = re.compile(r'^==PROF== Profiling "')


class ProgressEstimator:
    """Phase from the tools' own markers; fraction from ncu's launch count or the last run's duration."""

    def __init__(self, tool: str, launch_count: int | None, expected_s: float | None) -> None:
        self.tool = tool
        self.launch_count = launch_count
        self.expected_s = expected_s
        self.phase = "starting"
        self.profiled = 0
        self.done = False

    def feed(self, text: str) -> None:
        """Update from one output line."""
        if self.tool == "nsys":
            if "Collecting data" in text:
                self.phase = "collecting"
            elif text.startswith("Generating") or "Processing events" in text or "Importer" in text:
                self.phase = "importing"
            elif text.startswith("Generated:"):
                self.phase = "report written"
        elif self.tool == "ncu":
            if "==PROF== Connected to process" in text:
                self.phase = "profiling"
            elif _NCU_PROFILING_RE.match(text):
                self.profiled += 1
                self.phase = f"profiled {self.profiled} kernel launch(es)"
            elif "==PROF== Report:" in text:
                self.phase = "report written"

    def set_phase(self, phase: str) -> None:
        """Our own steps (importing, exporting, copying) set the phase directly."""
        self.phase = phase

    def estimate(self, elapsed_s: float) -> Progress:
        """The current estimate."""
        fraction: float | None = None
        if self.done:
            fraction = 1.0
        elif self.tool == "ncu" and self.launch_count:
            fraction = min(1.0, self.profiled / self.launch_count)
        elif self.expected_s:
            fraction = min(0.99, elapsed_s / self.expected_s)
        return Progress(self.phase, fraction, elapsed_s, self.expected_s)


#: Receives every line the program, the tool or Kernelscope prints.
OnLine = Callable[[LogLine], None]
#: Receives a progress estimate while a step runs.
OnProgress = Callable[[Progress], None]


@dataclass
class StepResult:
    """What one step returned: exit status, the lines it printed, whether it was cancelled."""
    returncode: int | None
    killed: str | None  # "cancel" | "timeout" | None
    output: str
    start_error: OSError | None = None
    stderr_tail: tuple[str, ...] = ()  # the last lines printed on stderr (the program's, through nsys/ncu)


class Session:
    """State shared by the steps of one session (log file, callbacks, deadline)."""

    def __init__(self, spec: SessionSpec, log: IO[str], on_line: OnLine | None,
                 cancel: threading.Event, estimator: ProgressEstimator,
                 on_progress: OnProgress | None = None) -> None:
        self.spec = spec
        self.log = log
        self.on_line = on_line
        self.on_progress = on_progress
        self.last_tick = 0.0
        self.cancel = cancel
        self.est = estimator
        self.t0 = time.monotonic()
        self.deadline = self.t0 + spec.timeout_s if spec.timeout_s else None
        self.write_error: OSError | None = None

    def elapsed(self) -> float:
        """Seconds since the session started."""
        return time.monotonic() - self.t0

    def emit(self, stream: str, text: str) -> None:
        """Log one line and pass it to ``on_line``."""
        if stream != "kernelscope":
            self.est.feed(text)
        line = text if stream != "kernelscope" else f"[kernelscope] {text}"
        if self.write_error is None:
            try:
                self.log.write(line + "\n")
                self.log.flush()
            except OSError as exc:  # disk full, folder gone: keep draining, report at the end
                self.write_error = exc
        if self.on_line is not None:
            self.on_line(LogLine(stream, text, self.elapsed(), self.est.estimate(self.elapsed())))

    def note(self, text: str) -> None:
        """Log one of Kernelscope's own lines."""
        self.emit("kernelscope", text)

    def tick(self) -> None:
        """Report progress if :data:`PROGRESS_INTERVAL_S` passed since the last report."""
        now = time.monotonic()
        if self.on_progress is not None and now - self.last_tick >= PROGRESS_INTERVAL_S:
            self.last_tick = now
            self.on_progress(self.est.estimate(now - self.t0))

    def run_step(self, argv: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                 keep_stdin: bool = False) -> StepResult:
        """Run argv in a new process group, stream its lines, honour cancel and the deadline."""
        captured: list[str] = []
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            return StepResult(None, None, "", exc)
        watchdog = start_watchdog(proc.pid)
        try:
            return self._wait_step(proc, captured)
        except BaseException:  # a callback raised, or Ctrl-C: the program must not outlive us
            kill_group(proc, grace_s=0.5)
            raise
        finally:
            stop_watchdog(watchdog)

    def _wait_step(self, proc: subprocess.Popen[bytes], captured: list[str]) -> StepResult:
        lines: queue.Queue[tuple[str, str | None]] = queue.Queue()

        def pump(stream: IO[bytes], name: str) -> None:
            for raw in iter(stream.readline, b""):
                text = raw.decode("utf-8", "replace").rstrip("\r\n")
                if "\r" in text:  # progress bars redraw with CR: keep the final state
                    text = text.rsplit("\r", 1)[-1]
                lines.put((name, text))
            stream.close()
            lines.put((name, None))

        assert proc.stdout is not None and proc.stderr is not None
        readers = [threading.Thread(target=pump, args=(proc.stdout, "stdout"), daemon=True),
                   threading.Thread(target=pump, args=(proc.stderr, "stderr"), daemon=True)]
        for r in readers:
            r.start()
        err_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        # Ctrl-C while waiting cancels the step: a handler, not KeyboardInterrupt, which could land
        # outside the loop's try (printing a line) and leave the program running (main thread only)
        installed, old_handler = False, None
        if threading.current_thread() is threading.main_thread():
            try:
                old_handler = signal.signal(signal.SIGINT, lambda _s, _f: self.cancel.set())
                installed = True
            except ValueError:
                pass
        try:
            self._pump_until_done(proc, lines, captured, err_tail)
        finally:
            if installed:
                signal.signal(signal.SIGINT, old_handler if old_handler is not None
                              else signal.default_int_handler)
        killed = self._killed
        rc = proc.wait()
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        return StepResult(rc, killed, "\n".join(captured), stderr_tail=tuple(err_tail))

    def _pump_until_done(self, proc: subprocess.Popen[bytes], lines: queue.Queue[tuple[str, str | None]],
                         captured: list[str], err_tail: collections.deque[str]) -> None:
        """Pass the program's lines on until both its streams close; cancel or time it out."""
        open_streams = 2
        killed: str | None = None
        exited_at: float | None = None
        self._killed = None
        self.tick()
        while open_streams:
            try:
                name, text = lines.get(timeout=0.1)
                if text is None:
                    open_streams -= 1
                else:
                    captured.append(text)
                    if name == "stderr" and text.strip():
                        err_tail.append(text)
                    self.emit(name, text)
            except queue.Empty:
                pass
            except KeyboardInterrupt:  # Ctrl-C in a terminal: the program is in its own group, stop it
                self.cancel.set()
            self.tick()
            if killed is None:
                if self.cancel.is_set():
                    killed = "cancel"
                elif self.deadline is not None and time.monotonic() > self.deadline:
                    killed = "timeout"
                if killed:
                    self._killed = killed
                    kill_group(proc)
            if proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                # a grandchild that keeps our pipes open must not hold the session forever
                if time.monotonic() - exited_at > 2.0:
                    kill_group(proc, grace_s=0.0)
                    break


def start_watchdog(pgid: int) -> subprocess.Popen[bytes] | None:
    """Start the watchdog that kills process group ``pgid`` if this process dies (see WATCHDOG)."""
    sh = "/bin/sh" if os.access("/bin/sh", os.X_OK) else shutil.which("sh")
    if sh is None:
        return None
    try:
        return subprocess.Popen([sh, "-c", WATCHDOG, "kernelscope-watchdog", str(pgid)],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError:
        return None  # no watchdog: the session still runs, only a SIGKILLed runner could orphan it


def stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
    """Tell the watchdog the step is over (it exits without killing anything)."""
    if watchdog is None:
        return
    assert watchdog.stdin is not None
    try:
        watchdog.stdin.write(b"done\n")
        watchdog.stdin.close()
    except OSError:
        pass
    try:
        watchdog.wait(timeout=5)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


def kill_group(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM the process group, then SIGKILL it after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def output_error(folder: Path, exc: OSError) -> OutputError:
    """One sentence for a session folder that cannot be written (full disk, read-only, denied)."""
    if exc.errno == errno.ENOSPC:
        why = "the disk is full"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why = "it is read-only or not writable by you"
    else:
        why = exc.strerror or str(exc)
    return OutputError(f"Cannot write the session folder {folder} ({why}); choose another output folder "
                       "with --out.")


def program_name(target: list[str]) -> str:
    """The program's name for sentences: the basename of its first argument."""
    return Path(target[0]).name if target else "the program"


def find_qdstrm(sdir: Path, name: str) -> Path | None:
    """The .qdstrm that nsys left in ``sdir`` for report ``name``, if any."""
    own = sdir / f"{name}.qdstrm"
    if own.is_file():
        return own
    others = sorted(sdir.glob("*.qdstrm"))
    return others[0] if others else None


def recovered_outcome(res: StepResult, prog: str, elapsed_s: float) -> tuple[OutcomeKind, str]:
    """How a session ends once Kernelscope imported the .qdstrm that nsys left."""
    kind, text = classify("nsys", res.returncode, res.output.replace("Importer error", "importer note"),
                          report_exists=True, elapsed_s=elapsed_s, program=prog, stderr_tail=res.stderr_tail)
    if kind is OutcomeKind.SUCCESS:
        text = "The session finished (nsys's import step failed; Kernelscope imported the .qdstrm itself)."
    return kind, text


def pick_qdstrm(names: list[str], report_name: str) -> str | None:
    """Among file names, the .qdstrm that belongs to ``report_name``."""
    own = f"{report_name}.qdstrm"
    if own in names:
        return own
    others = sorted(n for n in names if n.endswith(".qdstrm"))
    return others[0] if others else None


def pending_imports(names: list[str], report_name: str, per_rank: bool) -> list[tuple[str, str]]:
    """The (.qdstrm, .nsys-rep) file names that still need QdstrmImporter, among ``names``.

    One pair for a whole-job session (:func:`pick_qdstrm`); for a per-rank job, one pair per rank whose
    ``<name>_rank<N>.qdstrm`` has no ``<name>_rank<N>.nsys-rep`` beside it, in rank order.
    """
    if not per_rank:
        q = pick_qdstrm(names, report_name)
        rep = f"{report_name}.nsys-rep"
        return [(q, rep)] if q is not None and rep not in names else []
    out = []
    for q in rank_names(names, report_name, ".qdstrm"):
        rep = q[: -len(".qdstrm")] + ".nsys-rep"
        if rep not in names:
            out.append((q, rep))
    return out


def combine_imports(first: tuple[OutcomeKind, str], tried: list[tuple[str, OutcomeKind, str, bool]],
                    pending: int, where: str = "") -> tuple[OutcomeKind, str, list[str]]:
    """How a session ends after QdstrmImporter ran on each of ``pending`` recordings.

    Args:
        first: The outcome before the imports.
        tried: Per recording tried: (report name, outcome kind, sentence, imported).
        pending: How many recordings needed an import (cancel can stop before all were tried).
        where: `` on HOST`` for an SSH session.

    Returns:
        The outcome kind, its sentence and notes for the session.
    """
    done = [r for r, _, _, ok in tried if ok]
    failed = [(k, m) for _, k, m, ok in tried if not ok]
    notes = []
    if done:
        which = f" for {', '.join(done)}" if pending > 1 else ""
        notes.append(f"nsys's import step failed{where}; Kernelscope ran QdstrmImporter itself"
                     f"{' there' if where else ''}{which}.")
    if not failed and done:
        last = next(t for t in reversed(tried) if t[3])
        return last[1], last[2], notes
    if not failed:
        return first[0], first[1], notes
    kind, msg = failed[0]
    if pending > 1:
        msg += f" ({len(done)} of {pending} rank recordings were imported.)"
    if first[0] is OutcomeKind.CRASHED and kind is OutcomeKind.IMPORTER_FAILED:
        return first[0], first[1], [*notes, msg]  # the program's failure stays the story
    return kind, msg, notes
