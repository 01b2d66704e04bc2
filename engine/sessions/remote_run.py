"""Running a session on an SSH host: the remote folder, the wrapper, copying the reports back.

Called by :func:`engine.sessions.runner.run_session` when the spec names a host.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from engine.sessions import argv as A
from engine.sessions.launchers import rank_names
from engine.sessions.outcome import Outcome, OutcomeKind, classify
from engine.sessions.process import (  # noqa: F401 - LogLine, Progress, OutputError are part of this API
    KILL_GRACE_S,
    PROGRESS_INTERVAL_S,
    WATCHDOG,
    LogLine,
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
from engine.sessions.store import REPORT_SUFFIXES, SessionStore

REMOTE_ROOT = ".kernelscope/sessions"  # relative to the remote home directory


# Remote wrapper: run "$@" in its own session/process group (setsid, when the host has it); a
# shell-builtin `read` loop watches our ssh's stdin, and when it reaches EOF (our ssh was killed or
# lost) the whole group is killed. (Background jobs of a non-interactive shell read /dev/null, hence
# the copy of stdin on fd 3.) Exits with the program's status. $1 is the session folder (created);
# $2 the working directory: empty stays in the session folder, else it is entered from the remote home
# (exit 95 when it does not exist). Arguments starting with SESSION_TOKEN/ get the session folder's
# absolute path instead, so a program running elsewhere still writes its report there.
SESSION_TOKEN = "@KERNELSCOPE_SESSION@"
NO_WORKDIR_RC = 95
REMOTE_WRAPPER = (
    'mkdir -p "$1" && cd "$1" || exit 96; s=$(pwd); '
    'if [ -n "$2" ]; then cd && cd "$2" 2>/dev/null || '
    '{ echo "kernelscope: the working directory $2 does not exist on this host" >&2; exit 95; }; fi; '
    'shift 2; n=$#; while [ "$n" -gt 0 ]; do a=$1; shift; '
    f'case $a in {SESSION_TOKEN}/*) a="$s/${{a#{SESSION_TOKEN}/}}";; esac; '
    'set -- "$@" "$a"; n=$((n-1)); done; exec 3<&0; '
    'if command -v setsid >/dev/null 2>&1; then setsid "$@" </dev/null 3<&- & '
    'else "$@" </dev/null 3<&- & fi; p=$!; '
    '(while IFS= read -r _; do :; done <&3; '
    'kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; sleep 3; '
    'kill -KILL -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null) >/dev/null 2>&1 & w=$!; '
    'wait "$p"; rc=$?; kill "$w" 2>/dev/null; exit "$rc"'
)


class _Remote:
    """One session folder on an SSH host: run steps there, list it."""

    def __init__(self, sess: Session, remote_dir: str) -> None:
        from engine.system.ssh import ssh_argv

        self.sess = sess
        self.t = sess.spec.target.ssh_target()
        self.dir = remote_dir
        self.env_words = [f"{k}={v}" for k, v in sess.spec.env.items()]
        self._ssh_argv = ssh_argv

    def step(self, argv: list[str], workdir: str = "") -> StepResult:
        """Run argv in its own process group, killed when we go away.

        It runs in ``workdir`` (relative to the remote home; "." is the home) or, when that is empty,
        in the remote session folder.
        """
        wrapped = ["sh", "-c", REMOTE_WRAPPER, "kernelscope-session", self.dir, workdir,
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
        return remote_display(self.dir)


def run_remote(sess: Session, sid: str, sdir: Path, main_argv: list[str], target: list[str],
               store: SessionStore) -> Outcome:
    """Run the session on ``spec.host`` through ssh and copy its reports back."""
    spec = sess.spec
    t = spec.target.ssh_target()
    remote = _Remote(sess, f"{spec.target.remote_dir.rstrip('/') or REMOTE_ROOT}/{sid}")
    workdir = remote_workdir(spec.cwd)
    sess.note(f"running on {t.display} in {remote_display(workdir) if workdir != '.' else '~'} (reports "
              f"in {remote.display}): " + " ".join(main_argv))
    res = remote.step(main_argv, workdir)
    prog = spec.workload or program_name(target)
    failed = _failed_to_start(sess, res, main_argv, workdir, sid, sdir)
    if failed is not None:
        return failed
    notes: list[str] = []
    names = remote.ls()
    rep_name = f"{spec.report_name}{A.report_suffix(spec.tool) or ''}"
    recovery: tuple[OutcomeKind, str] | None = None
    imported: list[str] = []
    if spec.tool == "nsys" and res.killed is None:
        names, recovery, imported = _nsys_on_host(sess, remote, res, main_argv, prog, names, notes)
    reports = _copy_reports(sess, remote, names, sid, sdir, store, notes)
    if recovery is not None:
        kind, msg = recovery
        if imported and not all((sdir / r).is_file() for r in imported):
            kind, msg = OutcomeKind.SSH_ERROR, (
                f"The report was imported on {t.display} but could not be copied back; it is in "
                f"{remote.display} there.")
    else:
        kind, msg = classify(spec.tool, res.returncode, res.output, killed=res.killed,
                             report_exists=spec.tool != "bench" and ((sdir / rep_name).is_file() or bool(
                                 rank_names([p.name for p in reports], spec.report_name,
                                            A.report_suffix(spec.tool) or ""))),
                             qdstrm_exists=any(n.endswith(".qdstrm") for n in names),
                             elapsed_s=sess.elapsed(), program=prog, stderr_tail=res.stderr_tail)
    return Outcome(kind, msg, sid, sdir, res.returncode, sess.elapsed(), tuple(reports), tuple(notes))


def _failed_to_start(sess: Session, res: StepResult, main_argv: list[str], workdir: str, sid: str,
                     sdir: Path) -> Outcome | None:
    """The outcome when ssh, the working directory or the program was missing (None: it ran)."""
    from engine.system.ssh import explain_ssh_failure

    t = sess.spec.target.ssh_target()
    if res.start_error is not None:
        msg = "The ssh program was not found; install the OpenSSH client (openssh-client)."
        return Outcome(OutcomeKind.MISSING_TOOL, msg, sid, sdir, None, sess.elapsed())
    if res.killed is None and res.returncode == 255:
        why = explain_ssh_failure(t, 255, res.output)
        if why:
            return Outcome(OutcomeKind.SSH_ERROR, why, sid, sdir, 255, sess.elapsed())
    if res.returncode == NO_WORKDIR_RC and not res.killed and "does not exist on this host" in res.output:
        msg = (f"The working directory {remote_display(workdir)} does not exist on {t.display}; create it "
               "there or give another --remote-cwd (relative paths are under the remote home).")
        return Outcome(OutcomeKind.TOOL_ERROR, msg, sid, sdir, NO_WORKDIR_RC, sess.elapsed())
    if res.returncode == 127 and not res.killed:
        msg = (f"{main_argv[0]} was not found on {t.display}; install it there or pass its path "
               "(`kernelscope doctor --host` shows what is installed).")
        return Outcome(OutcomeKind.MISSING_TOOL, msg, sid, sdir, 127, sess.elapsed())
    return None


def _nsys_on_host(sess: Session, remote: _Remote, res: StepResult, main_argv: list[str], prog: str,
                  names: list[str], notes: list[str]
                  ) -> tuple[list[str], tuple[OutcomeKind, str] | None, list[str]]:
    """After nsys ran: import what it left unimported, export each report to SQLite, on the host.

    Returns the remote folder's reports then, the import recovery's outcome (None: none was
    needed) and the reports it imported; adds notes for the user to ``notes``.
    """
    spec = sess.spec
    t = spec.target.ssh_target()
    rep_name = f"{spec.report_name}{A.report_suffix(spec.tool) or ''}"
    per_rank = bool(spec.per_rank or spec.profile_ranks)
    nsys = (spec.tool_path or spec.tool) if per_rank else main_argv[0]
    recovery: tuple[OutcomeKind, str] | None = None
    imported: list[str] = []
    pending = pending_imports(names, spec.report_name, per_rank)
    first = classify("nsys", res.returncode, res.output, qdstrm_exists=True, program=prog,
                     stderr_tail=res.stderr_tail)
    if pending and (per_rank or first[0] in (OutcomeKind.IMPORTER_FAILED, OutcomeKind.CRASHED)):
        tried: list[tuple[str, OutcomeKind, str, bool]] = []
        for qdstrm, rep in pending:  # one per rank for a per-rank job
            if sess.cancel.is_set():
                break
            kind_r, msg_r, ok = _recover_remote_import(sess, remote, nsys, qdstrm, rep, res, prog)
            tried.append((rep, kind_r, msg_r, ok))
        kind_c, msg_c, more = combine_imports(first, tried, len(pending), f" on {t.display}")
        recovery, imported = (kind_c, msg_c), [r for r, _, _, ok in tried if ok]
        notes += more
        if imported:
            names = remote.ls()
    exports = rank_names(names, spec.report_name, ".nsys-rep") if per_rank \
        else [rep_name] if rep_name in names else []
    for rep in exports if not sess.cancel.is_set() else []:
        sqlite = rep[: -len(".nsys-rep")] + ".sqlite"
        sess.est.set_phase("exporting")
        sess.note(f"exporting to SQLite on {t.display}: {sqlite}")
        exp = remote.step(A.nsys_export_argv(nsys, rep, sqlite))
        if exp.killed:
            stopped = "cancelled" if exp.killed == "cancel" else "timed out"
            notes.append(f"The SQLite export was {stopped}; the .nsys-rep is kept and opens later.")
        elif exp.returncode != 0:
            notes.append("The SQLite export failed on the host; the .nsys-rep is kept (open it to retry "
                         "the export here).")
        names = remote.ls()
    return names, recovery, imported


def _copy_reports(sess: Session, remote: _Remote, names: list[str], sid: str, sdir: Path,
                  store: SessionStore, notes: list[str]) -> list[Path]:
    """Copy back every report the remote session folder holds; the ones that arrived (stored)."""
    reports: list[Path] = []
    if not names:
        return reports
    t = remote.t
    sess.est.set_phase("copying reports")
    sess.note(f"copying {', '.join(names)} from {t.display}")
    how, failure = copy_back(sess, [f"{remote.dir}/{n}" for n in names], sdir)
    for n in names:
        p = sdir / n
        if p.is_file():
            store.add_report(sid, p)
            reports.append(p)
    if failure is not None:
        notes.append(f"Copying the reports back failed ({failure}); they are still in "
                     f"{remote.display} on {t.display}.")
    elif how != "scp":
        notes.append(f"scp over SFTP failed on {t.display} (no SFTP server there?): the reports were "
                     f"copied back with {how}.")
    return reports


def copy_back(sess: Session, remote_paths: list[str], local_dir: Path) -> tuple[str, str | None]:
    """Copy remote files into ``local_dir``: scp over SFTP, else ``scp -O``, else ``ssh HOST cat``.

    A host without an SFTP server fails scp's default mode ("scp: Connection closed") and one without
    scp fails ``-O``; each is tried in turn (:func:`engine.system.ssh.copy_back_methods`), unless ssh
    itself failed (host key, login, network: every way would fail the same), the step was cancelled
    or it timed out. Returns (the way that worked, None) or (the last way tried, one sentence on why
    they failed).
    """
    from engine.system.ssh import copy_back_methods, explain_ssh_failure, is_connection_failure

    t = sess.spec.target.ssh_target()
    tried: list[str] = []
    name = "scp"
    for name, argvs in copy_back_methods(t, remote_paths, local_dir):
        if tried:
            sess.note(f"copying again with {name}: {tried[-1]}")
        res = None
        for argv in argvs:
            res = sess.run_step(argv)
            if res.returncode != 0 or res.killed or res.start_error is not None:
                break
        if res is None or (res.returncode == 0 and not res.killed and res.start_error is None):
            return name, None
        if res.killed:
            stopped = "was cancelled" if res.killed == "cancel" else "ran past the time limit"
            return name, f"{name} {stopped}"
        last = [ln.strip() for ln in res.output.splitlines() if ln.strip()]
        detail = str(res.start_error) if res.start_error is not None else (last[-1] if last else
                                                                            f"exit {res.returncode}")
        if res.start_error is None and is_connection_failure(res.output):
            return name, explain_ssh_failure(t, res.returncode or 255, res.output) or detail
        tried.append(f"{name} failed ({detail})")
    return name, "; ".join(tried)


def _recover_remote_import(sess: Session, remote: _Remote, nsys: str, qdstrm: str, rep_name: str,
                           res: StepResult, prog: str) -> tuple[OutcomeKind, str, bool]:
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
        return recovered_outcome(res, prog, sess.elapsed()) + (True,)
    lib = re.search(r"error while loading shared libraries: (\S+?):", imp.output)
    hint = (f"it needs {lib.group(1)}: set the target's remote_importer_libs to a folder on {where} that "
            "has it" if lib else
            f"exit {imp.returncode}: {(imp.output.strip().splitlines() or ['no output'])[-1]}")
    return OutcomeKind.IMPORTER_FAILED, (
        f"nsys could not import its recording on {where} and QdstrmImporter failed too ({hint}); the raw "
        f"{qdstrm} is kept: run {' '.join(A.importer_argv(importer, qdstrm, rep_name))} in "
        f"{remote.display} there once that is fixed."
    ), False


def remote_workdir(cwd: str | None) -> str:
    """The wrapper's working-directory argument for a spec's ``cwd`` on an SSH host ("." = the home)."""
    if not cwd or cwd in ("~", "~/"):
        return "."
    return cwd[2:] if cwd.startswith("~/") else cwd


def remote_display(remote_dir: str) -> str:
    """The remote folder as the user would type it (``~/...`` for a home-relative path)."""
    return remote_dir if remote_dir.startswith("/") else f"~/{remote_dir}"
