"""Sessions on an SSH host, through a real sshd on 127.0.0.1: streaming, copy-back, cancel, failures."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from engine.sessions.doctor import run_remote_doctor
from engine.sessions.outcome import OutcomeKind
from engine.sessions.runner import LogLine, run_session
from engine.sessions.spec import NcuOptions, SessionSpec, TargetSpec
from engine.sessions.store import SessionStore
from tests.conftest import FIXTURES, ORACLES, alive
from tests.engine import fake_tools
from tests.engine.sshd_fixture import Sshd, keygen, sshd  # noqa: F401  (fixture)


def _target(server: Sshd, remote: Path, **kw: object) -> TargetSpec:
    fields: dict[str, object] = {
        "host": "127.0.0.1", "user": server.user, "port": server.port,
        "identity_file": str(server.client_key), "known_hosts": str(server.known_hosts),
        "remote_dir": str(remote),
    }
    fields.update(kw)
    return TargetSpec(**fields)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "data" / "sessions.sqlite")


def test_remote_bench_streams(sshd: Sshd, tmp_path: Path, store: SessionStore) -> None:  # noqa: F811
    lines: list[LogLine] = []
    spec = SessionSpec(command=("python3", "-c", "import os; print('remote hi', os.getcwd())"),
                       out_dir=str(tmp_path / "out"), target=_target(sshd, tmp_path / "remote"))
    out = run_session(spec, on_line=lines.append, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    cwd = os.path.realpath(os.path.expanduser("~"))  # the program runs in the remote home by default
    assert ("stdout", f"remote hi {cwd}") in [(ln.stream, ln.text) for ln in lines]
    assert f"remote hi {cwd}" in out.log_path.read_text()
    assert store.get(out.session_id).target == f"{sshd.user}@127.0.0.1:{sshd.port}"  # type: ignore[union-attr]


def test_remote_ncu_report_is_copied_back(sshd: Sshd, tmp_path: Path, store: SessionStore) -> None:  # noqa: F811
    pytest.importorskip("ncu_report")
    from engine.reports.ncu import read_ncu

    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake)
    spec = SessionSpec(
        tool="ncu", command=("python3", "-c", "pass"), name="remote k", out_dir=str(tmp_path / "out"),
        target=_target(sshd, tmp_path / "remote"), tool_path=str(fake.ncu), ncu=NcuOptions(launch_count=2),
        env={k: env[k] for k in ("FAKE_MODE", "FAKE_NCU_REP", "FAKE_ARGV_LOG")},
    )
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert [p.name for p in out.reports] == ["remote_k.ncu-rep"]
    assert out.reports[0].parent == out.session_dir
    assert out.reports[0].read_bytes() == (FIXTURES / "ncu" / "host_overhead_fixed.ncu-rep").read_bytes()
    assert len(read_ncu(out.reports[0]).kernels) == 2
    assert "--clock-control none" in fake.argv_log.read_text().replace('", "', " ")
    assert [p.name for p in store.get(out.session_id).reports] == ["remote_k.ncu-rep"]  # type: ignore[union-attr]


def test_remote_cancel_kills_the_remote_program(sshd: Sshd, tmp_path: Path, store: SessionStore) -> None:  # noqa: F811
    cancel = threading.Event()
    pids: list[int] = []

    def on_line(ln: LogLine) -> None:
        if ln.text.startswith("pid "):
            pids.append(int(ln.text.split()[1]))
            cancel.set()

    code = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(120)"
    spec = SessionSpec(command=("python3", "-c", code), out_dir=str(tmp_path / "out"),
                       target=_target(sshd, tmp_path / "remote"))
    out = run_session(spec, on_line=on_line, cancel=cancel, store=store)
    assert out.kind is OutcomeKind.CANCELLED
    assert pids
    import time

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(pids[0]):
        time.sleep(0.1)
    assert not alive(pids[0]), "the remote program survived the cancel"


def test_remote_timeout(sshd: Sshd, tmp_path: Path, store: SessionStore) -> None:  # noqa: F811
    spec = SessionSpec(command=("sleep", "60"), out_dir=str(tmp_path / "out"), timeout_s=2,
                       target=_target(sshd, tmp_path / "remote"))
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.TIMEOUT and out.duration_s < 10


def test_remote_missing_tool(sshd: Sshd, tmp_path: Path, store: SessionStore) -> None:  # noqa: F811
    spec = SessionSpec(tool="nsys", command=("true",), out_dir=str(tmp_path / "out"),
                       tool_path="/nonexistent/nsys", target=_target(sshd, tmp_path / "remote"))
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.MISSING_TOOL
    assert out.message.startswith(f"/nonexistent/nsys was not found on {sshd.user}@127.0.0.1:{sshd.port}")


def test_remote_trust_failures_are_one_sentence(sshd: Sshd, tmp_path: Path, store: SessionStore) -> None:  # noqa: F811
    empty = tmp_path / "kh"
    empty.write_text("")
    spec = SessionSpec(command=("true",), out_dir=str(tmp_path / "out"),
                       target=_target(sshd, tmp_path / "remote", known_hosts=str(empty)))
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.SSH_ERROR and "is not in known_hosts" in out.message
    keygen(tmp_path / "stranger")
    stranger = _target(sshd, tmp_path / "r", identity_file=str(tmp_path / "stranger"))
    out = run_session(spec.with_(target=stranger), store=store)
    assert out.kind is OutcomeKind.SSH_ERROR and "refused our SSH key" in out.message
    assert "Permission denied" in out.log_path.read_text()  # ssh's own words stay in the log
    assert all(r.state == "finished" for r in store.list())


def test_remote_doctor(sshd: Sshd) -> None:  # noqa: F811
    checks = {c.name: c for c in run_remote_doctor(sshd.target())}
    assert checks["python"].status == "ok" and checks["python"].path
    assert checks["ncu"].status == "missing"
    assert checks["driver"].status == "missing" and "remote host" in checks["driver"].detail


NSYS_FAKE_ENV = ("FAKE_MODE", "FAKE_NSYS_REP", "FAKE_NSYS_SQLITE", "FAKE_ARGV_LOG")


def _kern_sum_csv(sqlite: Path) -> str:
    from engine.analysis.nsys.stats import run_report, to_csv
    from engine.reports import open_report

    return to_csv(run_report(open_report(sqlite), "cuda_gpu_kern_sum"))


def test_remote_nsys_importer_failure_is_recovered_on_the_host(sshd: Sshd, tmp_path: Path,  # noqa: F811
                                                               store: SessionStore) -> None:
    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake, "importer_fail")
    remote = tmp_path / "remote"
    spec = SessionSpec(
        tool="nsys", command=("python3", "-c", "print('remote app ran')"), name="app",
        out_dir=str(tmp_path / "out"), tool_path=str(fake.nsys),
        target=_target(sshd, remote, remote_importer_libs=str(fake.libs)),
        env={k: env[k] for k in NSYS_FAKE_ENV},
    )
    lines: list[LogLine] = []
    out = run_session(spec, on_line=lines.append, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert "imported the .qdstrm itself" in out.message
    assert any("QdstrmImporter itself there" in n for n in out.notes)
    assert sorted(p.name for p in out.reports) == ["app.nsys-rep", "app.qdstrm", "app.sqlite"]
    assert all(p.parent == out.session_dir for p in out.reports)
    # the importer beside the remote nsys ran in the remote session folder, with the libs on its path
    argvs = [json.loads(x) for x in fake.argv_log.read_text().splitlines()]
    assert [a[:2] for a in argvs] == [["nsys", "profile"], ["QdstrmImporter", "-i"], ["nsys", "export"]]
    assert argvs[1] == ["QdstrmImporter", "-i", "app.qdstrm", "-o", "app.nsys-rep",
                        f"LD_LIBRARY_PATH={fake.libs}"]
    assert argvs[2] == ["nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "--output",
                        "app.sqlite", "app.nsys-rep"]
    rdir = remote / out.session_id
    assert sorted(p.name for p in rdir.iterdir() if p.suffix != ".json") == \
        ["app.nsys-rep", "app.qdstrm", "app.sqlite"]
    # what came back is the recording, and reads back equal to NVIDIA's own numbers
    assert (out.session_dir / "app.nsys-rep").read_bytes() == \
        (FIXTURES / "nsys" / "host_overhead_fixed.nsys-rep").read_bytes()
    assert _kern_sum_csv(out.session_dir / "app.sqlite") == \
        (ORACLES / "host_overhead_fixed_cuda_gpu_kern_sum.csv").read_text()
    assert sorted(p.name for p in store.get(out.session_id).reports) == \
        ["app.nsys-rep", "app.qdstrm", "app.sqlite"]  # type: ignore[union-attr]
    phases = [ln.progress.phase for ln in lines]
    assert "importing" in phases and "exporting" in phases and "copying reports" in phases
    assert "remote app ran" in out.log_path.read_text()


def test_remote_nsys_importer_failure_without_libs_says_what(sshd: Sshd, tmp_path: Path,  # noqa: F811
                                                             store: SessionStore) -> None:
    fake = fake_tools.install(tmp_path / "root")
    env = fake_tools.env_for(fake, "importer_fail")
    spec = SessionSpec(
        tool="nsys", command=("python3", "-c", "pass"), name="app", out_dir=str(tmp_path / "out"),
        tool_path=str(fake.nsys), target=_target(sshd, tmp_path / "remote"),
        env={k: env[k] for k in NSYS_FAKE_ENV},
    )
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.IMPORTER_FAILED
    where = f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert f"needs libdw.so.1: set the target's remote_importer_libs to a folder on {where}" in out.message
    assert f"{fake.importer} -i app.qdstrm -o app.nsys-rep" in out.message
    assert [p.name for p in out.reports] == ["app.qdstrm"]  # the raw recording is copied back and kept
    # an importer path that is not there is named as such
    missing = _target(sshd, tmp_path / "remote", remote_importer="/no/QdstrmImporter")
    out = run_session(spec.with_(target=missing), store=store)
    assert out.kind is OutcomeKind.IMPORTER_FAILED
    assert "the QdstrmImporter given (/no/QdstrmImporter) is not an executable file there" in out.message
