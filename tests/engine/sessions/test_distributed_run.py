"""A real 2-process torchrun job (gloo on CPU) under the stand-in nsys: one report per rank, only some
ranks, or one report around the launcher; the store keeps the job as one session with its reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.sessions.outcome import OutcomeKind
from engine.sessions.runner import run_session
from engine.sessions.spec import SessionSpec
from engine.sessions.store import SessionStore
from tests.engine import fake_tools
from tests.engine.fake_tools import FakeInstall
from tests.engine.sshd_fixture import Sshd, sshd  # noqa: F401  (fixture)

TORCHRUN = str(Path(sys.executable).parent / "torchrun")
JOB = str(Path(__file__).with_name("ddp_gloo_job.py"))
# torchrun's ranks run under the interpreter of its #! line
PY_OF_TORCHRUN = Path(TORCHRUN).read_text().splitlines()[0][2:].strip() if Path(TORCHRUN).exists() else ""
pytestmark = pytest.mark.skipif(not Path(TORCHRUN).exists(), reason="torchrun (PyTorch) is not installed")


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "data" / "sessions.sqlite")


@pytest.fixture
def fake(tmp_path: Path) -> FakeInstall:
    return fake_tools.install(tmp_path / "root")


def _job(tmp_path: Path, **kw: object) -> SessionSpec:
    return SessionSpec(tool="nsys", name="ddp", out_dir=str(tmp_path / "out"), timeout_s=120,
                       command=(TORCHRUN, "--standalone", "--nproc-per-node", "2", JOB),
                       **kw)  # type: ignore[arg-type]


def _profiles(fake: FakeInstall) -> list[list[str]]:
    return [a for a in (json.loads(x) for x in fake.argv_log.read_text().splitlines()) if a[1] == "profile"]


def test_one_report_per_rank(tmp_path: Path, store: SessionStore, fake: FakeInstall) -> None:
    out = run_session(_job(tmp_path, per_rank=True), store=store, env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert sorted(p.name for p in out.reports) == ["ddp_rank0.nsys-rep", "ddp_rank0.sqlite",
                                                   "ddp_rank1.nsys-rep", "ddp_rank1.sqlite"]
    log = out.log_path.read_text()
    assert "rank 0 of 2 RANK=0 sum=12" in log and "rank 1 of 2 RANK=1 sum=12" in log
    profiles = _profiles(fake)
    assert len(profiles) == 2  # nsys ran inside each rank, not around torchrun
    for argv in profiles:
        i = argv.index("--output")
        assert argv[i + 1] == str(out.session_dir / "ddp_rank%q{RANK}")
        assert argv[i + 4:] == [PY_OF_TORCHRUN, "-u", JOB]
    rec = store.get(out.session_id)
    assert rec is not None and rec.command[:5] == (TORCHRUN, "--standalone", "--nproc-per-node", "2",
                                                   "--no-python")
    assert sorted(p.name for p in rec.reports) == sorted(p.name for p in out.reports)
    assert rec.spec["per_rank"] is True


def test_profile_only_rank_1(tmp_path: Path, store: SessionStore, fake: FakeInstall) -> None:
    out = run_session(_job(tmp_path, profile_ranks="1"), store=store, env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert sorted(p.name for p in out.reports) == ["ddp_rank1.nsys-rep", "ddp_rank1.sqlite"]
    log = out.log_path.read_text()
    assert "rank 0 of 2" in log and "rank 1 of 2" in log  # rank 0 still ran, unprofiled
    [argv] = _profiles(fake)
    assert argv[argv.index("--output") + 1] == str(out.session_dir / "ddp_rank%q{KERNELSCOPE_RANK}")


def test_one_report_around_the_launcher(tmp_path: Path, store: SessionStore, fake: FakeInstall) -> None:
    out = run_session(_job(tmp_path), store=store, env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert [p.name for p in out.reports] == ["ddp.nsys-rep", "ddp.sqlite"]
    [argv] = _profiles(fake)
    assert argv[-5:] == [TORCHRUN, "--standalone", "--nproc-per-node", "2", JOB]
    assert "rank 1 of 2" in out.log_path.read_text()


def test_cli_per_rank_flags(tmp_path: Path, fake: FakeInstall) -> None:
    import subprocess

    env = fake_tools.env_for(fake, KERNELSCOPE_DATA=str(tmp_path / "data"))
    res = subprocess.run([sys.executable, "-m", "engine.cli", "run", "--tool", "nsys", "--profile-ranks", "0",
                          "--name", "ddp", "--out", str(tmp_path / "out"), "--json", "--quiet", "--",
                          TORCHRUN, "--standalone", "--nproc-per-node", "2", JOB],
                         capture_output=True, text=True, env=env, timeout=180, check=False)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout[res.stdout.index("{"):])
    assert sorted(Path(p).name for p in doc["reports"]) == ["ddp_rank0.nsys-rep", "ddp_rank0.sqlite"]
    bad = subprocess.run([sys.executable, "-m", "engine.cli", "run", "--tool", "nsys", "--per-rank", "--",
                          "./app"], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "torchrun, srun, mpirun" in bad.stderr


def test_per_rank_job_on_an_ssh_host(tmp_path: Path, store: SessionStore, fake: FakeInstall,
                                     sshd: Sshd) -> None:  # noqa: F811
    """The job through a real sshd on 127.0.0.1: every rank's report is exported there and copied back."""
    from tests.engine.sessions.test_remote import NSYS_FAKE_ENV, _target

    env = fake_tools.env_for(fake)
    spec = _job(tmp_path, per_rank=True).with_(
        tool_path=str(fake.nsys), target=_target(sshd, tmp_path / "remote"),
        env={k: env[k] for k in NSYS_FAKE_ENV})
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert sorted(p.name for p in out.reports) == ["ddp_rank0.nsys-rep", "ddp_rank0.sqlite",
                                                   "ddp_rank1.nsys-rep", "ddp_rank1.sqlite"]
    exports = [a for a in (json.loads(x) for x in fake.argv_log.read_text().splitlines()) if a[1] == "export"]
    assert [a[-1] for a in exports] == ["ddp_rank0.nsys-rep", "ddp_rank1.nsys-rep"]


RANK_FILES = ["ddp_rank0.nsys-rep", "ddp_rank0.qdstrm", "ddp_rank0.sqlite",
              "ddp_rank1.nsys-rep", "ddp_rank1.qdstrm", "ddp_rank1.sqlite"]
#: locally an imported .qdstrm is scratch and removed, as nsys does (over SSH it is what came back)
LOCAL_RANK_FILES = [f for f in RANK_FILES if not f.endswith(".qdstrm")]


def _imports(fake: FakeInstall) -> list[list[str]]:
    calls = (json.loads(x) for x in fake.argv_log.read_text().splitlines())
    return [a for a in calls if a[0] == "QdstrmImporter"]


def test_per_rank_import_failure_is_recovered_for_every_rank(tmp_path: Path, store: SessionStore,
                                                             fake: FakeInstall) -> None:
    """As on the lent H100s: nsys's import step fails in every rank; each rank's .qdstrm is imported."""
    from tests.conftest import FIXTURES

    env = fake_tools.env_for(fake, "importer_fail", KERNELSCOPE_IMPORTER_LIBS=str(fake.libs))
    out = run_session(_job(tmp_path, per_rank=True), store=store, env=env)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert "imported the .qdstrm itself" in out.message
    assert sorted(p.name for p in out.reports) == LOCAL_RANK_FILES
    assert [p.name for p in out.reports][:2] == ["ddp_rank0.nsys-rep", "ddp_rank1.nsys-rep"]  # rank order
    d = out.session_dir
    assert [a[1:5] for a in _imports(fake)] == [
        ["-i", str(d / f"ddp_rank{r}.qdstrm"), "-o", str(d / f"ddp_rank{r}.nsys-rep")] for r in (0, 1)]
    assert any("ddp_rank0.nsys-rep, ddp_rank1.nsys-rep" in n for n in out.notes)
    for r in (0, 1):
        assert (d / f"ddp_rank{r}.nsys-rep").read_bytes() == \
            (FIXTURES / "nsys" / "host_overhead_fixed.nsys-rep").read_bytes()
    rec = store.get(out.session_id)
    assert rec is not None and sorted(p.name for p in rec.reports) == LOCAL_RANK_FILES


def test_per_rank_import_failure_without_libs_names_what_to_run(tmp_path: Path, store: SessionStore,
                                                                fake: FakeInstall) -> None:
    env = fake_tools.env_for(fake, "importer_fail")
    out = run_session(_job(tmp_path, per_rank=True), store=store, env=env)
    assert out.kind is OutcomeKind.IMPORTER_FAILED
    assert "needs libdw.so.1" in out.message and "(0 of 2 rank recordings were imported.)" in out.message
    assert sorted(p.name for p in out.reports) == ["ddp_rank0.qdstrm", "ddp_rank1.qdstrm"]  # kept
    assert len(_imports(fake)) == 2  # each rank was tried


def test_per_rank_import_failure_is_recovered_on_an_ssh_host(tmp_path: Path, store: SessionStore,
                                                             fake: FakeInstall, sshd: Sshd) -> None:  # noqa: F811
    from tests.engine.sessions.test_remote import NSYS_FAKE_ENV, _target

    env = fake_tools.env_for(fake, "importer_fail")
    spec = _job(tmp_path, per_rank=True).with_(
        tool_path=str(fake.nsys),
        target=_target(sshd, tmp_path / "remote", remote_importer_libs=str(fake.libs)),
        env={k: env[k] for k in NSYS_FAKE_ENV})
    out = run_session(spec, store=store)
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert sorted(p.name for p in out.reports) == RANK_FILES
    assert [a[1:5] for a in _imports(fake)] == [["-i", "ddp_rank0.qdstrm", "-o", "ddp_rank0.nsys-rep"],
                                               ["-i", "ddp_rank1.qdstrm", "-o", "ddp_rank1.nsys-rep"]]
    want = "QdstrmImporter itself there for ddp_rank0.nsys-rep, ddp_rank1.nsys-rep"
    assert any(want in n for n in out.notes)
    exports = [a for a in (json.loads(x) for x in fake.argv_log.read_text().splitlines()) if a[1] == "export"]
    assert [a[-1] for a in exports] == ["ddp_rank0.nsys-rep", "ddp_rank1.nsys-rep"]
