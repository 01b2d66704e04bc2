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

import os
import re
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.sessions import argv as A
from engine.sessions.launchers import rank_reports
from engine.sessions.outcome import Outcome, OutcomeKind, classify
from engine.sessions.process import (  # noqa: F401 - LogLine, Progress, OutputError are part of this API
    KILL_GRACE_S,
    PROGRESS_INTERVAL_S,
    WATCHDOG,
    LogLine,
    OnLine,
    OnProgress,
    OutputError,
    Progress,
    ProgressEstimator,
    Session,
    StepResult,
    combine_imports,
    find_qdstrm,
    kill_group,
    output_error,
    pending_imports,
    pick_qdstrm,
    program_name,
    recovered_outcome,
    start_watchdog,
    stop_watchdog,
)
from engine.sessions.remote_run import REMOTE_ROOT, SESSION_TOKEN, run_remote  # noqa: F401
from engine.sessions.spec import SessionSpec
from engine.sessions.store import REPORT_SUFFIXES, SessionStore
from engine.sessions.telemetry_capture import recording as telemetry_recording

__all__ = ["LogLine", "OutputError", "Progress", "describe", "local_cwd", "new_session_id", "resolve_tool",
           "run_session"]


def new_session_id(spec: SessionSpec) -> str:
    """``YYYYmmdd-HHMMSS-<tool>-<name>-<4 hex>``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{spec.tool}-{spec.report_name}-{secrets.token_hex(2)}"


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


def local_cwd(spec: SessionSpec) -> Path:
    """The folder a local session's program runs in: ``spec.cwd`` or the caller's current directory.

    Raises:
        SpecError: the folder does not exist (nothing was started).
    """
    from engine.sessions.spec import SpecError

    wd = Path(spec.cwd).expanduser() if spec.cwd else Path.cwd()
    if not wd.is_dir():
        raise SpecError(f"The working directory {wd} does not exist or is not a folder; run from the "
                        "project folder or give an existing one.")
    return wd.absolute()


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
    if spec.target.is_local:
        spec = spec.with_(cwd=str(local_cwd(spec)))  # written into spec.json: where it really ran
    env = dict(os.environ if env is None else env)
    env.update(spec.env)
    cancel = cancel or threading.Event()
    target = A.target_argv(spec)
    store = store or SessionStore()
    sid = new_session_id(spec)
    out_root = Path(spec.out_dir).expanduser().absolute()  # the program may run elsewhere (cwd)
    sdir = out_root / sid
    try:
        sdir.mkdir(parents=True)
        spec.save(sdir / "spec.json")
        log = (sdir / "session.log").open("w", encoding="utf-8")
    except OSError as exc:
        raise output_error(sdir if out_root.exists() else out_root, exc) from exc
    target_label = "local" if spec.target.is_local else spec.target.ssh_target().display
    if not spec.target.is_local and spec.workload and target and target[0] == sys.executable:
        target = ["python3", *target[1:]]  # the registry names this machine's interpreter
    tool_path = resolve_tool(spec, env) if spec.target.is_local else (spec.tool_path or spec.tool)
    base = str(sdir / spec.report_name) if spec.target.is_local else f"{SESSION_TOKEN}/{spec.report_name}"
    main_argv = A.session_argv(spec, tool_path, base, target) if (tool_path or spec.tool == "bench") else []
    store.begin(sid, spec.to_dict(), sdir, main_argv or target, target_label)
    expected = store.last_duration(spec.tool, main_argv or target, target_label)
    est = ProgressEstimator(spec.tool, spec.ncu.launch_count if spec.tool == "ncu" else None, expected)
    sess = Session(spec, log, on_line, cancel, est, on_progress)
    try:
        with log, telemetry_recording(spec, sdir, sess.note, **_telemetry_kw()):
            if spec.target.is_local:
                outcome = _run_local(sess, sid, sdir, tool_path, main_argv, target, env, store)
            else:
                outcome = run_remote(sess, sid, sdir, main_argv, target, store)
            if sess.write_error is not None and outcome.kind not in (OutcomeKind.CANCELLED,):
                err = output_error(sdir, sess.write_error)
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


def _run_local(sess: Session, sid: str, sdir: Path, tool_path: str | None, main_argv: list[str],
               target: list[str], env: dict[str, str], store: SessionStore) -> Outcome:
    spec = sess.spec
    prog = spec.workload or program_name(target)
    if not main_argv:
        msg = (f"No {spec.tool} was found on this machine; install Nsight "
               f"{'Systems' if spec.tool == 'nsys' else 'Compute'} or pass its path (`kernelscope doctor` "
               "shows what is installed).")
        sess.note(msg)
        return Outcome(OutcomeKind.MISSING_TOOL, msg, sid, sdir, None, sess.elapsed())
    sess.note(f"running in {spec.cwd}: " + " ".join(main_argv))
    res = sess.run_step(main_argv, cwd=Path(spec.cwd) if spec.cwd else None, env=env)
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
    per_rank = bool(spec.per_rank or spec.profile_ranks)
    qdstrms = sorted(sdir.glob("*.qdstrm")) if spec.tool == "nsys" else []
    reps = [rep] if rep is not None and rep.is_file() and rep.stat().st_size > 0 else []
    if per_rank:  # one report per rank: <name>_rank<N>.<suffix>
        reps = rank_reports(sdir, spec.report_name, A.report_suffix(spec.tool) or "")
    for r in reps:
        store.add_report(sid, r)
        reports.append(r)
    kind, msg = classify(spec.tool, res.returncode, res.output, killed=res.killed,
                         report_exists=bool(reports), qdstrm_exists=bool(qdstrms),
                         elapsed_s=sess.elapsed(), program=prog, stderr_tail=res.stderr_tail)
    names = [p.name for p in sdir.iterdir() if p.is_file() and p.stat().st_size > 0] if qdstrms else []
    pending = pending_imports(names, spec.report_name, per_rank) if qdstrms else []
    if pending and tool_path and res.killed is None and (per_rank or (
            kind in (OutcomeKind.IMPORTER_FAILED, OutcomeKind.CRASHED) and not reports)):
        kind, msg = _recover_imports(sess, sid, store, tool_path, sdir, pending, env, (kind, msg), res, prog,
                                     reports, notes)
        if per_rank:  # rank order, the imported ones included
            reports[:] = rank_reports(sdir, spec.report_name, ".nsys-rep")
    reports += [q for q in qdstrms if q.exists()]  # keep the raw streams whether or not they were imported
    nsys_reps = [r for r in reports if r.name.endswith(".nsys-rep")] if spec.tool == "nsys" else []
    for rep in nsys_reps if tool_path is not None else []:
        assert tool_path is not None
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


def _recover_imports(sess: Session, sid: str, store: SessionStore, nsys: str, sdir: Path,
                     pending: list[tuple[str, str]], env: dict[str, str], first: tuple[OutcomeKind, str],
                     res: StepResult, prog: str, reports: list[Path], notes: list[str]
                     ) -> tuple[OutcomeKind, str]:
    """Import every .qdstrm nsys left (one per rank for a per-rank job); register what was imported."""
    tried: list[tuple[str, OutcomeKind, str, bool]] = []
    removed: list[str] = []
    for q, r in pending:
        if sess.cancel.is_set():
            break
        kind, msg, ok = _recover_import(sess, nsys, sdir / q, sdir / r, env, first[1], res, prog)
        if ok:
            store.add_report(sid, sdir / r)
            reports.append(sdir / r)
            raw = sdir / q
            size = raw.stat().st_size if raw.exists() else 0
            try:  # nsys deletes its .qdstrm once imported; a DDP rank's is ~2 GB of scratch
                raw.unlink(missing_ok=True)
                removed.append(f"Removed {q} ({size / 1e9:.2f} GB) after importing it into {r}, "
                               "as nsys does.")
            except OSError:
                pass
        tried.append((r, kind, msg, ok))
    kind, msg, more = combine_imports(first, tried, len(pending))
    notes += more + removed
    return kind, msg


def _recover_import(sess: Session, nsys: str, qdstrm: Path, rep: Path, env: dict[str, str], msg: str,
                    res: StepResult, prog: str) -> tuple[OutcomeKind, str, bool]:
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
        return recovered_outcome(res, prog, sess.elapsed()) + (True,)
    lib = re.search(r"error while loading shared libraries: (\S+?):", imp.output)
    hint = (f"it needs {lib.group(1)}: set KERNELSCOPE_IMPORTER_LIBS to a folder that has it"
            if lib else f"exit {imp.returncode}: {(imp.output.strip().splitlines() or ['no output'])[-1]}")
    return OutcomeKind.IMPORTER_FAILED, (
        f"nsys could not import its recording and QdstrmImporter failed too ({hint}); the raw {qdstrm.name} "
        f"is kept: run {' '.join(argv)} once that is fixed."
    ), False


def describe(outcome: Outcome) -> dict[str, Any]:
    """A JSON-ready summary of an outcome."""
    return {
        "session_id": outcome.session_id, "kind": outcome.kind.value, "message": outcome.message,
        "session_dir": str(outcome.session_dir), "returncode": outcome.returncode,
        "duration_s": round(outcome.duration_s, 3), "reports": [str(p) for p in outcome.reports],
        "notes": list(outcome.notes), "log": str(outcome.log_path),
    }
