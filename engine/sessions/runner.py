"""Run a session: launch the program under its tool, stream its output, classify, keep the reports.

The API the GUI's Run view uses (stable)::

    outcome = run_session(spec, on_line=callback, cancel=threading.Event())

``on_line`` receives a :class:`LogLine` for every line the program or tool prints (and for
Kernelscope's own steps, stream ``"kernelscope"``), with a :class:`Progress` estimate; it is called on
the thread that runs the session, so GUIs should forward it to their own thread. Setting ``cancel``
kills the whole process group (or, over SSH, the remote process group) and returns a ``cancelled``
outcome. Everything printed goes to ``session.log`` in the session folder as it arrives, so a crash
of Kernelscope itself keeps the log up to that point.

``on_progress`` (optional) receives a :class:`Progress` about every :data:`PROGRESS_INTERVAL_S` while a
step runs, even when the program prints nothing, so a progress bar moves for quiet programs whose
duration is known from an earlier run. It is called on the same thread as ``on_line`` (from the loop
that waits for the step), never concurrently with it.

If the process that runs the session dies (SIGKILL, a crash of the GUI), a small watchdog process kills
the step's whole process group, so no profiled program is left running unseen.
"""

from __future__ import annotations

import errno
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from engine.sessions import argv as A
from engine.sessions.outcome import Outcome, OutcomeKind, classify
from engine.sessions.spec import SessionSpec
from engine.sessions.store import REPORT_SUFFIXES, SessionStore
from engine.sessions.telemetry_capture import recording as telemetry_recording
from engine.system.errors import KernelscopeError

KILL_GRACE_S = 3.0
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
REMOTE_ROOT = ".kernelscope/sessions"  # relative to the remote home directory
# Remote wrapper: run "$@" in its own session/process group (setsid, when the host has it) inside the
# session folder; a shell-builtin `read` loop watches our ssh's stdin, and when it reaches EOF (our ssh
# was killed or lost) the whole group is killed. (Background jobs of a non-interactive shell read
# /dev/null, hence the copy of stdin on fd 3.) Exits with the program's status.
REMOTE_WRAPPER = (
    'mkdir -p "$1" && cd "$1" || exit 96; shift; exec 3<&0; '
    'if command -v setsid >/dev/null 2>&1; then setsid "$@" </dev/null 3<&- & '
    'else "$@" </dev/null 3<&- & fi; p=$!; '
    '(while IFS= read -r _; do :; done <&3; '
    'kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; sleep 3; '
    'kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null) >/dev/null 2>&1 & w=$!; '
    'wait "$p"; rc=$?; kill "$w" 2>/dev/null; exit "$rc"'
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


OnLine = Callable[[LogLine], None]
OnProgress = Callable[[Progress], None]
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


@dataclass
class _StepResult:
    returncode: int | None
    killed: str | None  # "cancel" | "timeout" | None
    output: str
    start_error: OSError | None = None


class _Session:
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
        return time.monotonic() - self.t0

    def emit(self, stream: str, text: str) -> None:
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
        self.emit("kernelscope", text)

    def tick(self) -> None:
        """Report progress if :data:`PROGRESS_INTERVAL_S` passed since the last report."""
        now = time.monotonic()
        if self.on_progress is not None and now - self.last_tick >= PROGRESS_INTERVAL_S:
            self.last_tick = now
            self.on_progress(self.est.estimate(now - self.t0))

    def run_step(self, argv: list[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
                 keep_stdin: bool = False) -> _StepResult:
        """Run argv in a new process group, stream its lines, honour cancel and the deadline."""
        captured: list[str] = []
        try:
            proc = subprocess.Popen(
                argv, cwd=cwd, env=dict(env) if env is not None else None,
                stdin=subprocess.PIPE if keep_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            return _StepResult(None, None, "", exc)
        watchdog = _start_watchdog(proc.pid)
        try:
            return self._wait_step(proc, captured)
        except BaseException:  # a callback raised, or Ctrl-C: the program must not outlive us
            _kill_group(proc, grace_s=0.5)
            raise
        finally:
            _stop_watchdog(watchdog)

    def _wait_step(self, proc: subprocess.Popen[bytes], captured: list[str]) -> _StepResult:
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
        open_streams = 2
        killed: str | None = None
        exited_at: float | None = None
        self.tick()
        while open_streams:
            try:
                name, text = lines.get(timeout=0.1)
                if text is None:
                    open_streams -= 1
                else:
                    captured.append(text)
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
                    _kill_group(proc)
            if proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                # a grandchild that keeps our pipes open must not hold the session forever
                if time.monotonic() - exited_at > 2.0:
                    _kill_group(proc, grace_s=0.0)
                    break
        rc = proc.wait()
        if proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
        return _StepResult(rc, killed, "\n".join(captured))


def _start_watchdog(pgid: int) -> subprocess.Popen[bytes] | None:
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


def _stop_watchdog(watchdog: subprocess.Popen[bytes] | None) -> None:
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


def _kill_group(proc: subprocess.Popen[bytes], grace_s: float = KILL_GRACE_S) -> None:
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


def new_session_id(spec: SessionSpec) -> str:
    """``YYYYmmdd-HHMMSS-<tool>-<name>-<4 hex>``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.tool}-{spec.report_name}-{secrets.token_hex(2)}"


def _output_error(folder: Path, exc: OSError) -> OutputError:
    if exc.errno == errno.ENOSPC:
        why = "the disk is full"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why = "it is read-only or not writable by you"
    else:
        why = exc.strerror or str(exc)
    return OutputError(f"Cannot write the session folder {folder} ({why}); choose another output folder "
                       "with --out.")


def resolve_tool(spec: SessionSpec, env: Mapping[str, str]) -> str | None:
    """The local nsys/ncu executable for a spec (None if not found; bench needs none)."""
    from engine.sessions.doctor import find_ncu
    from engine.system.tools import find_nsys

    if spec.tool == "bench":
        return None
    if spec.tool_path:
        p = Path(spec.tool_path).expanduser()
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        found = shutil.which(spec.tool_path, path=env.get("PATH", ""))
        return found
    if spec.tool == "nsys":
        tools = find_nsys(env)  # newest first
        return str(tools[0].path) if tools else None
    ncu = find_ncu(env)
    return str(ncu) if ncu else None


def run_session(
    spec: SessionSpec,
    on_line: OnLine | None = None,
    cancel: threading.Event | None = None,
    *,
    store: SessionStore | None = None,
    env: Mapping[str, str] | None = None,
    on_progress: OnProgress | None = None,
) -> Outcome:
    """Run one session to the end and register it in the store.

    Args:
        spec: What to run.
        on_line: Called with every output line (on this thread).
        cancel: Set it to stop the session (kills the process group).
        store: The session store (default: the user's).
        env: Environment for tool discovery and the program (default: ``os.environ``).
        on_progress: Called about every :data:`PROGRESS_INTERVAL_S` while a step runs (on this
            thread), with the phase, fraction, elapsed and expected seconds, even when nothing is printed.

    Returns:
        The outcome; every failure of the program or tool is an outcome, not an exception.

    Raises:
        KernelscopeError: the spec is invalid, the workload is unknown, or the session folder cannot
            be written (nothing was started then).
    """
    spec.validate()
    env = dict(os.environ if env is None else env)
    env.update(spec.env)
    cancel = cancel or threading.Event()
    target = A.target_argv(spec)
    store = store or SessionStore()
    sid = new_session_id(spec)
    out_root = Path(spec.out_dir).expanduser()
    sdir = out_root / sid
    try:
        sdir.mkdir(parents=True)
        spec.save(sdir / "spec.json")
        log = (sdir / "session.log").open("w", encoding="utf-8")
    except OSError as exc:
        raise _output_error(sdir if out_root.exists() else out_root, exc) from exc
    target_label = "local" if spec.target.is_local else spec.target.ssh_target().display
    if not spec.target.is_local and spec.workload and target and target[0] == sys.executable:
        target = ["python3", *target[1:]]  # the registry names this machine's interpreter
    tool_path = resolve_tool(spec, env) if spec.target.is_local else (spec.tool_path or spec.tool)
    base = str(sdir / spec.report_name) if spec.target.is_local else spec.report_name
    main_argv = A.session_argv(spec, tool_path, base, target) if (tool_path or spec.tool == "bench") else []
    store.begin(sid, spec.to_dict(), sdir, main_argv or target, target_label)
    expected = store.last_duration(spec.tool, main_argv or target, target_label)
    est = ProgressEstimator(spec.tool, spec.ncu.launch_count if spec.tool == "ncu" else None, expected)
    sess = _Session(spec, log, on_line, cancel, est, on_progress)
    try:
        with log, telemetry_recording(spec, sdir, sess.note, **_telemetry_kw()):
            if spec.target.is_local:
                outcome = _run_local(sess, sid, sdir, tool_path, main_argv, target, env, store)
            else:
                outcome = _run_remote(sess, sid, sdir, main_argv, target, store)
            if sess.write_error is not None and outcome.kind not in (OutcomeKind.CANCELLED,):
                err = _output_error(sdir, sess.write_error)
                outcome = Outcome(OutcomeKind.OUTPUT_ERROR, str(err), sid, sdir, outcome.returncode,
                                  outcome.duration_s, outcome.reports, outcome.notes)
            sess.est.done = True
            sess.note(f"{outcome.kind.value}: {outcome.message}")
    except BaseException as exc:  # KeyboardInterrupt or a bug: the row must not stay 'running'
        store.finish(sid, OutcomeKind.INTERRUPTED.value,
                     f"The session stopped unexpectedly ({type(exc).__name__}); its log is kept.", None,
                     sess.elapsed(), _report_files(sdir))
        raise
    store.finish(sid, outcome.kind.value, outcome.message, outcome.returncode, outcome.duration_s,
                 list(outcome.reports))
    return outcome


#: tests without a GPU replace the telemetry source here (the only stand-in: NVML needs a GPU)
TELEMETRY_SOURCE_FACTORY: Callable[[SessionSpec], object] | None = None


def _telemetry_kw() -> dict[str, Any]:
    return {} if TELEMETRY_SOURCE_FACTORY is None else {"source_factory": TELEMETRY_SOURCE_FACTORY}


def _report_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.name.endswith(REPORT_SUFFIXES))


def _program_name(target: list[str]) -> str:
    return Path(target[0]).name if target else "the program"


def _run_local(sess: _Session, sid: str, sdir: Path, tool_path: str | None, main_argv: list[str],
               target: list[str], env: dict[str, str], store: SessionStore) -> Outcome:
    spec = sess.spec
    prog = spec.workload or _program_name(target)
    if not main_argv:
        msg = (f"No {spec.tool} was found on this machine; install Nsight "
               f"{'Systems' if spec.tool == 'nsys' else 'Compute'} or pass its path (`kernelscope doctor` "
               "shows what is installed).")
        sess.note(msg)
        return Outcome(OutcomeKind.MISSING_TOOL, msg, sid, sdir, None, sess.elapsed())
    sess.note("running: " + " ".join(main_argv))
    res = sess.run_step(main_argv, cwd=sdir, env=env)
    if res.start_error is not None:
        missing = main_argv[0]
        msg = (f"Could not start {missing} ({res.start_error.strerror}); check that it exists and is "
               "executable.")
        sess.note(msg)
        kind = OutcomeKind.MISSING_TOOL if isinstance(res.start_error, FileNotFoundError) else \
            OutcomeKind.TOOL_ERROR
        return Outcome(kind, msg, sid, sdir, None, sess.elapsed())
    rep = A.expected_report(str(sdir / spec.report_name), spec.tool)
    notes: list[str] = []
    reports: list[Path] = []
    qdstrm = _find_qdstrm(sdir, spec.report_name) if spec.tool == "nsys" else None
    if rep is not None and rep.is_file() and rep.stat().st_size > 0:
        store.add_report(sid, rep)
        reports.append(rep)
    kind, msg = classify(spec.tool, res.returncode, res.output, killed=res.killed,
                         report_exists=bool(reports), qdstrm_exists=qdstrm is not None,
                         elapsed_s=sess.elapsed(), program=prog)
    if kind is OutcomeKind.IMPORTER_FAILED and qdstrm is not None and tool_path and rep is not None:
        kind, msg, recovered = _recover_import(sess, tool_path, qdstrm, rep, env, msg, res, prog)
        if recovered:
            store.add_report(sid, rep)
            reports.append(rep)
            notes.append("nsys's import step failed; Kernelscope ran QdstrmImporter itself.")
    if qdstrm is not None and qdstrm.exists():
        reports.append(qdstrm)  # keep the raw stream whether or not it could be imported
    if spec.tool == "nsys" and rep is not None and rep in reports and tool_path:
        sqlite = rep.parent / (rep.name[: -len(".nsys-rep")] + ".sqlite")
        sess.est.set_phase("exporting")
        sess.note("exporting to SQLite: " + sqlite.name)
        exp = sess.run_step(A.nsys_export_argv(tool_path, str(rep), str(sqlite)), cwd=sdir, env=env)
        if exp.returncode == 0 and sqlite.is_file() and sqlite.stat().st_size > 0:
            store.add_report(sid, sqlite)
            reports.append(sqlite)
        elif exp.killed:
            notes.append(f"The SQLite export was {'cancelled' if exp.killed == 'cancel' else 'timed out'}; "
                         "the .nsys-rep is kept and opens later.")
        else:
            notes.append("The SQLite export failed; the .nsys-rep is kept (open it to retry the export).")
    return Outcome(kind, msg, sid, sdir, res.returncode, sess.elapsed(), tuple(reports), tuple(notes))


def _find_qdstrm(sdir: Path, name: str) -> Path | None:
    own = sdir / f"{name}.qdstrm"
    if own.is_file():
        return own
    others = sorted(sdir.glob("*.qdstrm"))
    return others[0] if others else None


def _recover_import(sess: _Session, nsys: str, qdstrm: Path, rep: Path, env: dict[str, str], msg: str,
                    res: _StepResult, prog: str) -> tuple[OutcomeKind, str, bool]:
    """Run QdstrmImporter on the .qdstrm that nsys left; classify what follows."""
    from engine.sessions.doctor import find_qdstrm_importer, importer_env

    importer = find_qdstrm_importer(Path(nsys), env)
    if importer is None:
        sess.note("nsys's import step failed and no QdstrmImporter was found beside it.")
        return OutcomeKind.IMPORTER_FAILED, (
            f"nsys recorded the run but could not import it, and no QdstrmImporter was found next to {nsys}; "
            f"run QdstrmImporter -i {qdstrm} -o {rep} from an Nsight Systems install (or set "
            "KERNELSCOPE_IMPORTER to its path)."
        ), False
    sess.est.set_phase("importing")
    argv = A.importer_argv(str(importer), str(qdstrm), str(rep))
    sess.note("nsys left a .qdstrm; importing it ourselves: " + " ".join(argv))
    imp = sess.run_step(argv, cwd=rep.parent, env=importer_env(env))
    if imp.killed:
        return classify("nsys", imp.returncode, imp.output, killed=imp.killed, elapsed_s=sess.elapsed(),
                        program=prog) + (False,)
    if imp.returncode == 0 and rep.is_file() and rep.stat().st_size > 0:
        return _recovered(res, prog, sess.elapsed()) + (True,)
    lib = re.search(r"error while loading shared libraries: (\S+?):", imp.output)
    hint = (f"it needs {lib.group(1)}: set KERNELSCOPE_IMPORTER_LIBS to a folder that has it"
            if lib else f"exit {imp.returncode}: {(imp.output.strip().splitlines() or ['no output'])[-1]}")
    return OutcomeKind.IMPORTER_FAILED, (
        f"nsys could not import its recording and QdstrmImporter failed too ({hint}); the raw {qdstrm.name} "
        f"is kept: run {' '.join(argv)} once that is fixed."
    ), False


def _recovered(res: _StepResult, prog: str, elapsed_s: float) -> tuple[OutcomeKind, str]:
    """How a session ends once Kernelscope imported the .qdstrm that nsys left."""
    kind, text = classify("nsys", res.returncode, res.output.replace("Importer error", "importer note"),
                          report_exists=True, elapsed_s=elapsed_s, program=prog)
    if kind is OutcomeKind.SUCCESS:
        text = "The session finished (nsys's import step failed; Kernelscope imported the .qdstrm itself)."
    return kind, text


def _pick_qdstrm(names: list[str], report_name: str) -> str | None:
    own = f"{report_name}.qdstrm"
    if own in names:
        return own
    others = sorted(n for n in names if n.endswith(".qdstrm"))
    return others[0] if others else None


class _Remote:
    """One session folder on an SSH host: run steps there, list it."""

    def __init__(self, sess: _Session, remote_dir: str) -> None:
        from engine.system.ssh import ssh_argv

        self.sess = sess
        self.t = sess.spec.target.ssh_target()
        self.dir = remote_dir
        self.env_words = [f"{k}={v}" for k, v in sess.spec.env.items()]
        self._ssh_argv = ssh_argv

    def step(self, argv: list[str]) -> _StepResult:
        """Run argv in the remote session folder, in its own process group, killed when we go away."""
        wrapped = ["sh", "-c", REMOTE_WRAPPER, "kernelscope-session", self.dir,
                   *(["env", *self.env_words] if self.env_words else []), *argv]
        return self.sess.run_step(self._ssh_argv(self.t, wrapped), keep_stdin=True)

    def query(self, argv: list[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str] | None:
        """A short remote command's output (None when ssh could not run it in time)."""
        try:
            return subprocess.run(self._ssh_argv(self.t, argv), stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None

    def ls(self) -> list[str]:
        """The report files in the remote session folder."""
        res = self.query(["ls", "-1A", self.dir])
        if res is None or res.returncode != 0:
            return []
        return [n for n in res.stdout.splitlines() if n.endswith(REPORT_SUFFIXES)]

    @property
    def display(self) -> str:
        return _remote_display(self.dir)


def _run_remote(sess: _Session, sid: str, sdir: Path, main_argv: list[str], target: list[str],
                store: SessionStore) -> Outcome:
    from engine.system.ssh import explain_ssh_failure, scp_from_argv

    spec = sess.spec
    t = spec.target.ssh_target()
    remote = _Remote(sess, f"{spec.target.remote_dir.rstrip('/') or REMOTE_ROOT}/{sid}")
    sess.note(f"running on {t.display} in {remote.display}: " + " ".join(main_argv))
    res = remote.step(main_argv)
    prog = spec.workload or _program_name(target)
    if res.start_error is not None:
        msg = "The ssh program was not found; install the OpenSSH client (openssh-client)."
        return Outcome(OutcomeKind.MISSING_TOOL, msg, sid, sdir, None, sess.elapsed())
    if res.killed is None and res.returncode == 255:
        why = explain_ssh_failure(t, 255, res.output)
        if why:
            return Outcome(OutcomeKind.SSH_ERROR, why, sid, sdir, 255, sess.elapsed())
    if res.returncode == 127 and not res.killed:
        msg = (f"{main_argv[0]} was not found on {t.display}; install it there or pass its path "
               "(`kernelscope doctor --host` shows what is installed).")
        return Outcome(OutcomeKind.MISSING_TOOL, msg, sid, sdir, 127, sess.elapsed())
    reports: list[Path] = []
    notes: list[str] = []
    names = remote.ls()
    rep_name = f"{spec.report_name}{A.report_suffix(spec.tool) or ''}"
    recovery: tuple[OutcomeKind, str] | None = None
    recovered = False
    if spec.tool == "nsys" and res.killed is None:
        nsys = main_argv[0]
        qdstrm = _pick_qdstrm(names, spec.report_name)
        if rep_name not in names and qdstrm is not None and classify(
                "nsys", res.returncode, res.output, qdstrm_exists=True, program=prog)[0] is \
                OutcomeKind.IMPORTER_FAILED:
            kind_r, msg_r, ok = _recover_remote_import(sess, remote, nsys, qdstrm, rep_name, res, prog)
            recovery, recovered = (kind_r, msg_r), ok
            if ok:
                notes.append(f"nsys's import step failed on {t.display}; Kernelscope ran QdstrmImporter "
                             "itself there.")
                names = remote.ls()
        if rep_name in names and not sess.cancel.is_set():
            sqlite = rep_name[: -len(".nsys-rep")] + ".sqlite"
            sess.est.set_phase("exporting")
            sess.note(f"exporting to SQLite on {t.display}: {sqlite}")
            exp = remote.step(A.nsys_export_argv(nsys, rep_name, sqlite))
            if exp.killed:
                stopped = "cancelled" if exp.killed == "cancel" else "timed out"
                notes.append(f"The SQLite export was {stopped}; the .nsys-rep is kept and opens later.")
            elif exp.returncode != 0:
                notes.append("The SQLite export failed on the host; the .nsys-rep is kept (open it to retry "
                             "the export here).")
            names = remote.ls()
    # copy back every report the remote session folder holds
    if names:
        sess.est.set_phase("copying reports")
        sess.note(f"copying {', '.join(names)} from {t.display}")
        cp = sess.run_step(scp_from_argv(t, [f"{remote.dir}/{n}" for n in names], sdir))
        for n in names:
            p = sdir / n
            if p.is_file():
                store.add_report(sid, p)
                reports.append(p)
        if cp.returncode != 0:
            why = explain_ssh_failure(t, cp.returncode or 1, cp.output) or cp.output.strip()
            notes.append(f"Copying the reports back failed ({why}); they are still in "
                         f"{remote.display} on {t.display}.")
    if recovery is not None:
        kind, msg = recovery
        if recovered and not (sdir / rep_name).is_file():
            kind, msg = OutcomeKind.SSH_ERROR, (
                f"The report was imported on {t.display} but could not be copied back; it is in "
                f"{remote.display} there.")
    else:
        kind, msg = classify(spec.tool, res.returncode, res.output, killed=res.killed,
                             report_exists=(sdir / rep_name).is_file() if spec.tool != "bench" else False,
                             qdstrm_exists=any(n.endswith(".qdstrm") for n in names),
                             elapsed_s=sess.elapsed(), program=prog)
    return Outcome(kind, msg, sid, sdir, res.returncode, sess.elapsed(), tuple(reports), tuple(notes))


def _recover_remote_import(sess: _Session, remote: _Remote, nsys: str, qdstrm: str, rep_name: str,
                           res: _StepResult, prog: str) -> tuple[OutcomeKind, str, bool]:
    """Find and run QdstrmImporter on the host, in the remote session folder; classify what follows."""
    spec = sess.spec
    where = remote.t.display
    explicit = spec.target.remote_importer or spec.env.get("KERNELSCOPE_IMPORTER")
    libs = spec.target.remote_importer_libs or spec.env.get("KERNELSCOPE_IMPORTER_LIBS")
    found = remote.query(A.find_importer_argv(nsys, explicit))
    importer = found.stdout.strip().splitlines()[-1] if found and found.returncode == 0 and \
        found.stdout.strip() else None
    if importer is None:
        if explicit:
            why = f"the QdstrmImporter given ({explicit}) is not an executable file there"
        else:
            why = f"no QdstrmImporter was found beside {nsys} there"
        sess.note(f"nsys's import step failed on {where} and {why}.")
        return OutcomeKind.IMPORTER_FAILED, (
            f"nsys recorded the run on {where} but could not import it, and {why}; set the target's "
            f"remote_importer to the importer's path on the host, or run QdstrmImporter -i {qdstrm} -o "
            f"{rep_name} in {remote.display} there."
        ), False
    sess.est.set_phase("importing")
    argv = A.with_library_path_argv(libs, A.importer_argv(importer, qdstrm, rep_name))
    shown = " ".join([*([f"LD_LIBRARY_PATH={libs}"] if libs else []), *A.importer_argv(importer, qdstrm,
                                                                                     rep_name)])
    sess.note(f"nsys left {qdstrm} on {where}; importing it there ourselves: {shown}")
    imp = remote.step(argv)
    if imp.killed:
        return classify("nsys", imp.returncode, imp.output, killed=imp.killed, elapsed_s=sess.elapsed(),
                        program=prog) + (False,)
    if imp.returncode == 0 and rep_name in remote.ls():
        return _recovered(res, prog, sess.elapsed()) + (True,)
    lib = re.search(r"error while loading shared libraries: (\S+?):", imp.output)
    hint = (f"it needs {lib.group(1)}: set the target's remote_importer_libs to a folder on {where} that "
            "has it" if lib else
            f"exit {imp.returncode}: {(imp.output.strip().splitlines() or ['no output'])[-1]}")
    return OutcomeKind.IMPORTER_FAILED, (
        f"nsys could not import its recording on {where} and QdstrmImporter failed too ({hint}); the raw "
        f"{qdstrm} is kept: run {' '.join(A.importer_argv(importer, qdstrm, rep_name))} in "
        f"{remote.display} there once that is fixed."
    ), False


def describe(outcome: Outcome) -> dict[str, Any]:
    """A JSON-ready summary of an outcome."""
    return {
        "session_id": outcome.session_id, "kind": outcome.kind.value, "message": outcome.message,
        "session_dir": str(outcome.session_dir), "returncode": outcome.returncode,
        "duration_s": round(outcome.duration_s, 3), "reports": [str(p) for p in outcome.reports],
        "notes": list(outcome.notes), "log": str(outcome.log_path),
    }


def _remote_display(remote_dir: str) -> str:
    return remote_dir if remote_dir.startswith("/") else f"~/{remote_dir}"
