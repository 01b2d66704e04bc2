"""The session runner with real subprocesses: streaming, cancel, timeout, crashes, the importer recovery,
and reports read back by the engine (fake nsys/ncu write the real H200 recordings)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.sessions.outcome import OutcomeKind
from engine.sessions.runner import LogLine, OutputError, Progress, run_session
from engine.sessions.spec import NcuOptions, NsysOptions, SessionSpec
from engine.sessions.store import SessionStore
from tests.conftest import FIXTURES, ORACLES, alive
from tests.engine import fake_tools
from tests.engine.fake_tools import FakeInstall

PY = sys.executable


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "data" / "sessions.sqlite")


@pytest.fixture
def fake(tmp_path: Path) -> fake_tools.FakeInstall:
    return fake_tools.install(tmp_path / "root")


def _spec(tmp_path: Path, *cmd: str, **kw: object) -> SessionSpec:
    return SessionSpec(command=tuple(cmd), out_dir=str(tmp_path / "out"), **kw)  # type: ignore[arg-type]


def test_bench_streams_lines_keeps_log_and_registers(tmp_path: Path, store: SessionStore) -> None:
    code = ("import sys\nfor i in range(3):\n    print(f'line {i}', flush=True)\n"
            "print('warn', file=sys.stderr)")
    lines: list[LogLine] = []
    out = run_session(_spec(tmp_path, PY, "-c", code), on_line=lines.append, store=store)
    assert out.kind is OutcomeKind.SUCCESS and out.returncode == 0
    prog = [(ln.stream, ln.text) for ln in lines if ln.stream != "kernelscope"]
    assert [t for s, t in prog if s == "stdout"] == ["line 0", "line 1", "line 2"]
    assert ("stderr", "warn") in prog
    assert lines[-1].progress.fraction == 1.0
    log = out.log_path.read_text()
    assert "line 2\n" in log and "warn\n" in log and "[kernelscope] success" in log
    saved = SessionSpec.load(out.session_dir / "spec.json")
    assert saved.command == (PY, "-c", code)
    rec = store.get(out.session_id)
    assert rec is not None and (rec.state, rec.kind, rec.returncode) == ("finished", "success", 0)
    # the second run of the same command gets a progress fraction from the first one's duration
    lines2: list[LogLine] = []
    run_session(_spec(tmp_path, PY, "-c", code), on_line=lines2.append, store=store)
    assert any(ln.progress.fraction is not None and ln.progress.fraction < 1 for ln in lines2[:-1])


def test_quiet_program_gets_periodic_progress_from_the_last_duration(tmp_path: Path,
        store: SessionStore) -> None:
    quiet = _spec(tmp_path, PY, "-c", "import time; time.sleep(1.6)")
    first: list[Progress] = []
    out = run_session(quiet, store=store, on_progress=first.append)
    assert out.kind is OutcomeKind.SUCCESS
    assert first and all(p.fraction is None and p.expected_s is None for p in first)  # nothing to go by
    expected = store.last_duration("bench", list(quiet.command), "local")
    assert expected is not None and expected >= 1.6
    ticks: list[tuple[float, Progress]] = []
    lines: list[LogLine] = []
    out = run_session(quiet, store=store, on_line=lines.append,
                      on_progress=lambda p: ticks.append((time.monotonic(), p)))
    assert out.kind is OutcomeKind.SUCCESS
    assert all(ln.stream == "kernelscope" for ln in lines)  # the program printed nothing
    progs = [p for _, p in ticks]
    assert len(progs) >= 3  # about every 0.5 s over 1.6 s, with no output to drive on_line
    assert all(p.expected_s == expected for p in progs)
    gaps = [b - a for (a, _), (b, _) in zip(ticks, ticks[1:], strict=False)]
    assert all(0.45 <= g <= 1.0 for g in gaps), gaps
    elapsed = [p.elapsed_s or 0.0 for p in progs]
    fractions = [p.fraction or 0.0 for p in progs]
    assert elapsed == sorted(elapsed) and fractions == sorted(fractions)
    for p in progs:
        assert p.fraction == pytest.approx(min(0.99, (p.elapsed_s or 0.0) / expected))
    assert 0.4 < fractions[-1] < 1.0 and fractions[0] < 0.2


@pytest.mark.parametrize(("code", "words"), [
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "killed by SIGSEGV"),
    ("import sys; print('bad input'); sys.exit(3)", "exited with status 3"),
])
def test_bench_crash(tmp_path: Path, store: SessionStore, code: str, words: str) -> None:
    out = run_session(_spec(tmp_path, PY, "-c", code), store=store)
    assert out.kind is OutcomeKind.CRASHED and words in out.message
    assert store.get(out.session_id).kind == "crashed"  # type: ignore[union-attr]


HANG = ("import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print('child', child.pid, flush=True)\nprint('ready', flush=True)\ntime.sleep(120)")


def test_timeout_kills_the_whole_process_group(tmp_path: Path, store: SessionStore) -> None:
    pids: list[int] = []

    def grab(ln: LogLine) -> None:
        if ln.text.startswith("child "):
            pids.append(int(ln.text.split()[1]))

    t0 = time.monotonic()
    out = run_session(_spec(tmp_path, PY, "-c", HANG, timeout_s=2.0), on_line=grab, store=store)
    assert out.kind is OutcomeKind.TIMEOUT and "2 s timeout" in out.message
    assert time.monotonic() - t0 < 8
    assert pids and not alive(pids[0])  # the grandchild died with its group
    assert "ready" in out.log_path.read_text()
    assert store.get(out.session_id).kind == "timeout"  # type: ignore[union-attr]


def test_cancel_kills_group_and_keeps_partial_log(tmp_path: Path, store: SessionStore) -> None:
    cancel = threading.Event()
    pids: list[int] = []

    def on_line(ln: LogLine) -> None:
        if ln.text.startswith("child "):
            pids.append(int(ln.text.split()[1]))
        if ln.text == "ready":
            cancel.set()

    out = run_session(_spec(tmp_path, PY, "-c", HANG), on_line=on_line, cancel=cancel, store=store)
    assert out.kind is OutcomeKind.CANCELLED and out.duration_s < 8
    assert pids and not alive(pids[0])
    assert "ready" in out.log_path.read_text()


def test_missing_program_and_missing_tool(tmp_path: Path, store: SessionStore) -> None:
    out = run_session(_spec(tmp_path, str(tmp_path / "nope")), store=store)
    assert out.kind is OutcomeKind.MISSING_TOOL and "Could not start" in out.message
    env = {"PATH": str(tmp_path), "KERNELSCOPE_TOOL_ROOT": str(tmp_path / "empty")}
    out = run_session(_spec(tmp_path, PY, "-c", "pass", tool="ncu"), store=store, env=env)
    assert out.kind is OutcomeKind.MISSING_TOOL and "No ncu was found" in out.message
    assert store.get(out.session_id).state == "finished"  # type: ignore[union-attr]


def test_unwritable_output_folder_starts_nothing(tmp_path: Path, store: SessionStore) -> None:
    with pytest.raises(OutputError, match=r"Cannot write the session folder /sys/kernelscope-test .*--out"):
        run_session(SessionSpec(command=(PY, "-c", "pass"), out_dir="/sys/kernelscope-test"), store=store)
    (tmp_path / "afile").write_text("")
    with pytest.raises(OutputError, match="choose another output folder"):
        run_session(SessionSpec(command=(PY, "-c", "pass"), out_dir=str(tmp_path / "afile")), store=store)
    assert store.list() == []  # nothing registered


def test_full_disk_mid_run_is_one_sentence(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes writes past 256 KiB in any file fail (EFBIG) like a full output folder; the
    # store's own files stay far below that.
    script = f"""
import resource, signal, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
from engine.sessions.runner import run_session
from engine.sessions.spec import SessionSpec
from engine.sessions.store import SessionStore
store = SessionStore()  # created before the limit
resource.setrlimit(resource.RLIMIT_FSIZE, (262144, 262144))
out = run_session(SessionSpec(command=(sys.executable, "-c", "print('x' * 2000000)"),
                              out_dir={str(tmp_path / 'out')!r}), store=store)
print(out.kind.value, out.message, sep="|")
"""
    import subprocess

    env = {**os.environ, "KERNELSCOPE_DATA": str(tmp_path / "data")}
    res = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert res.returncode == 0, res.stderr
    kind, msg = res.stdout.strip().split("|")
    assert kind == "output_error" and "Cannot write the session folder" in msg and "File too large" in msg
    (row,) = SessionStore(tmp_path / "data" / "sessions.sqlite").list()
    assert row.kind == "output_error" and row.log_path.stat().st_size <= 262144


def test_runner_killed_mid_run_leaves_store_consistent(tmp_path: Path) -> None:
    import subprocess

    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
from engine.sessions.runner import run_session
from engine.sessions.spec import SessionSpec
run_session(SessionSpec(command=(sys.executable, "-c", "import time, glob; "
            "open(glob.glob({str(tmp_path / 'out')!r} + '/*/')[0] + 'part.ncu-rep', 'w').write('r'); "
            "print('started', flush=True); time.sleep(60)"), out_dir={str(tmp_path / 'out')!r}))
"""
    env = {**os.environ, "KERNELSCOPE_DATA": str(tmp_path / "data")}
    runner = subprocess.Popen([PY, "-c", script], env=env)
    deadline = time.monotonic() + 30
    logs: list[Path] = []
    while time.monotonic() < deadline:
        logs = list((tmp_path / "out").glob("*/session.log"))
        if logs and "\nstarted\n" in logs[0].read_text():  # the program's line, not the echoed argv
            break
        time.sleep(0.05)
    assert logs, "the session never started"
    store = SessionStore(tmp_path / "data" / "sessions.sqlite")
    assert store.list()[0].state == "running"  # still alive: not touched
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    (rec,) = store.list()  # reconciles
    assert (rec.state, rec.kind) == ("finished", "interrupted")
    assert "session.log" in (rec.message or "") and "1 report file(s) were kept" in (rec.message or "")
    assert [p.name for p in rec.reports] == ["part.ncu-rep"]
    assert "started" in rec.log_path.read_text()
    # the watchdog ends the program (test_sigkilled_runner_leaves_no_orphans); this is only a safety net
    for line in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"part.ncu-rep" in line.read_bytes() and int(line.parent.name) != os.getpid():
                os.kill(int(line.parent.name), signal.SIGKILL)
        except OSError:
            pass


def test_sigkilled_runner_leaves_no_orphans(tmp_path: Path) -> None:
    import subprocess

    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[3])!r})
from engine.sessions.runner import run_session
from engine.sessions.spec import SessionSpec
run_session(SessionSpec(command=(sys.executable, "-c", {HANG!r}), out_dir={str(tmp_path / 'out')!r}),
            on_line=lambda ln: print(ln.stream, ln.text, flush=True))
"""
    env = {**os.environ, "KERNELSCOPE_DATA": str(tmp_path / "data")}
    runner = subprocess.Popen([PY, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    assert runner.stdout is not None
    program = child = None
    for line in runner.stdout:
        words = line.split()
        if words[:2] == ["stdout", "child"]:
            child = int(words[2])
        if words[:2] == ["stdout", "ready"]:
            break
    program_pids = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat")
                    if _ppid(p) == runner.pid and "time.sleep(120)" in _cmdline(p.parent)]
    assert child is not None and len(program_pids) == 1, program_pids
    program = program_pids[0]
    try:
        assert alive(program) and alive(child)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and (alive(program) or alive(child)):
            time.sleep(0.05)
        assert not alive(program), "the program outlived its SIGKILLed runner"
        assert not alive(child), "the program's child outlived the SIGKILLed runner"
    finally:
        for pid in (program, child):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, TypeError):
                pass


def _ppid(stat: Path) -> int:
    try:
        return int(stat.read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cmdline(proc_dir: Path) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# -- nsys / ncu through stand-ins -----------------------------------------------------------------
def _kern_sum_csv(sqlite: Path) -> str:
    from engine.analysis.nsys.stats import run_report, to_csv
    from engine.reports import open_report

    return to_csv(run_report(open_report(sqlite), "cuda_gpu_kern_sum"))


def test_nsys_session_exports_and_reads_back(tmp_path: Path, store: SessionStore,
        fake: FakeInstall) -> None:
    spec = _spec(tmp_path, PY, "-c", "print('app ran')", tool="nsys", name="fixed",
                 nsys=NsysOptions(cuda_memory_usage=True))
    lines: list[LogLine] = []
    out = run_session(spec, on_line=lines.append, store=store, env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert [p.name for p in out.reports] == ["fixed.nsys-rep", "fixed.sqlite"]
    argvs = [json.loads(x) for x in fake.argv_log.read_text().splitlines()]
    assert argvs[-2] == ["nsys", "profile", "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none",
                         "--cuda-memory-usage=true", "--output", str(out.session_dir / "fixed"),
                         "--force-overwrite", "true", PY, "-c", "print('app ran')"]
    assert argvs[-1][:2] == ["nsys", "export"]
    phases = [ln.progress.phase for ln in lines]
    assert "collecting" in phases and "exporting" in phases
    assert "app ran" in out.log_path.read_text()
    assert _kern_sum_csv(out.session_dir / "fixed.sqlite") == \
        (ORACLES / "host_overhead_fixed_cuda_gpu_kern_sum.csv").read_text()
    assert sorted(p.name for p in store.get(out.session_id).reports) == ["fixed.nsys-rep", "fixed.sqlite"]  # type: ignore[union-attr]


def test_nsys_importer_failure_is_recovered_with_libs(tmp_path: Path, store: SessionStore,
        fake: FakeInstall) -> None:
    env = fake_tools.env_for(fake, "importer_fail", KERNELSCOPE_IMPORTER_LIBS=str(fake.libs))
    out = run_session(_spec(tmp_path, PY, "-c", "pass", tool="nsys", name="app"), store=store, env=env)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert "imported the .qdstrm itself" in out.message and any("QdstrmImporter" in n for n in out.notes)
    # the raw stream is scratch once imported: removed, as nsys does, and said so
    assert sorted(p.name for p in out.reports) == ["app.nsys-rep", "app.sqlite"]
    assert not (out.session_dir / "app.qdstrm").exists()
    assert any(n.startswith("Removed app.qdstrm") for n in out.notes)
    imp = [json.loads(x) for x in fake.argv_log.read_text().splitlines() if "QdstrmImporter" in x][0]
    assert imp == ["QdstrmImporter", "-i", str(out.session_dir / "app.qdstrm"), "-o",
                   str(out.session_dir / "app.nsys-rep"), f"LD_LIBRARY_PATH={fake.libs}"]
    assert (out.session_dir / "app.nsys-rep").read_bytes()[:28] == b"NVIDIA Tegra Profiler Report"
    assert _kern_sum_csv(out.session_dir / "app.sqlite") == \
        (ORACLES / "host_overhead_fixed_cuda_gpu_kern_sum.csv").read_text()


def test_nsys_importer_failure_without_libs_says_what(tmp_path: Path, store: SessionStore,
        fake: FakeInstall) -> None:
    out = run_session(_spec(tmp_path, PY, "-c", "pass", tool="nsys", name="app"), store=store,
                      env=fake_tools.env_for(fake, "importer_fail"))
    assert out.kind is OutcomeKind.IMPORTER_FAILED
    assert "needs libdw.so.1: set KERNELSCOPE_IMPORTER_LIBS" in out.message
    assert str(fake.importer) in out.message and "app.qdstrm" in out.message
    assert [p.name for p in out.reports] == ["app.qdstrm"]  # the raw recording is kept and registered
    assert [p.name for p in store.get(out.session_id).reports] == ["app.qdstrm"]  # type: ignore[union-attr]


def test_nsys_permission_and_export_failure(tmp_path: Path, store: SessionStore,
        fake: FakeInstall) -> None:
    out = run_session(_spec(tmp_path, PY, "-c", "pass", tool="nsys", nsys=NsysOptions(sample="process-tree")),
                      store=store, env=fake_tools.env_for(fake, "paranoid"))
    assert out.kind is OutcomeKind.PERMISSION and "perf_event_paranoid" in out.message
    out = run_session(_spec(tmp_path, PY, "-c", "pass", tool="nsys"), store=store,
                      env=fake_tools.env_for(fake, "export_fail"))
    assert out.kind is OutcomeKind.SUCCESS and [p.suffix for p in out.reports] == [".nsys-rep"]
    assert "SQLite export failed" in out.notes[0]


def test_nsys_target_crash_keeps_report(tmp_path: Path, store: SessionStore,
        fake: FakeInstall) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"
    out = run_session(_spec(tmp_path, PY, "-c", code, tool="nsys"), store=store, env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.CRASHED and "killed by SIGSEGV (the report up to the crash is kept)" in \
        out.message
    assert ".nsys-rep" in [p.suffix for p in out.reports]


def test_ncu_session_reads_back(tmp_path: Path, store: SessionStore,
        fake: FakeInstall) -> None:
    pytest.importorskip("ncu_report")
    from engine.reports.ncu import read_ncu

    spec = _spec(tmp_path, PY, "-c", "pass", tool="ncu", name="k",
                 ncu=NcuOptions(kernel_name="regex:sgemm|saxpy", launch_count=2))
    lines: list[LogLine] = []
    out = run_session(spec, on_line=lines.append, store=store, env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    argv = json.loads(fake.argv_log.read_text().splitlines()[-1])
    assert argv == ["ncu", "--set", "full", "--kernel-name", "regex:sgemm|saxpy", "--launch-count", "2",
                    "--clock-control", "none", "--export", str(out.session_dir / "k"), "--force-overwrite",
                    PY, "-c", "pass"]
    fractions = [ln.progress.fraction for ln in lines if ln.text.startswith("==PROF== Profiling")]
    assert fractions == [0.5, 1.0]
    kernels = read_ncu(out.reports[0]).kernels
    assert list(kernels["Mangled Name"])[1] == "_Z5saxpyifPKfPf"
    assert kernels.loc[0, "duration_ns"] == 2_101_888
    assert out.reports[0].read_bytes() == (FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep").read_bytes()


@pytest.mark.parametrize(("mode", "code", "kind", "words"), [
    ("perm", "pass", OutcomeKind.PERMISSION, "ERR_NVGPUCTRPERM"),
    ("nokernels", "pass", OutcomeKind.TOOL_ERROR, "profiled no kernel"),
    ("ok", "import sys; sys.exit(5)", OutcomeKind.CRASHED, "exited with status 5"),
])
def test_ncu_failures(tmp_path: Path, store: SessionStore, fake: FakeInstall, mode: str, code: str,
                      kind: OutcomeKind, words: str) -> None:
    out = run_session(_spec(tmp_path, PY, "-c", code, tool="ncu"), store=store,
                      env=fake_tools.env_for(fake, mode))
    assert out.kind is kind and words in out.message
