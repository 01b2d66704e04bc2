"""GPU telemetry recorded beside a session's reports (issue 5: "the sessions issue starts them together").

NVML needs a GPU, so the one stand-in is the telemetry *source*: a replay of the real H200 recording.
The runner, sampler, recorder and CLI are the real ones.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.sessions import runner
from engine.sessions.outcome import OutcomeKind
from engine.sessions.spec import SessionSpec, SpecError
from engine.sessions.store import SessionStore
from engine.telemetry.recording import read_recording
from tests.conftest import FIXTURES
from tests.engine.sshd_fixture import sshd  # noqa: F401  (fixture)

PY = sys.executable
RECORDING = FIXTURES / "telemetry" / "telemetry_h200.csv"


def _spec(tmp_path: Path, *cmd: str, **kw: object) -> SessionSpec:
    return SessionSpec(command=tuple(cmd), out_dir=str(tmp_path / "out"), **kw)  # type: ignore[arg-type]


def _log(outcome) -> str:  # noqa: ANN001
    return (outcome.session_dir / "session.log").read_text()


def test_session_records_telemetry_with_absolute_times(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.telemetry.sources import ReplaySource

    start_ns = time.time_ns()
    monkeypatch.setattr(runner, "TELEMETRY_SOURCE_FACTORY",
                        lambda spec: ReplaySource(RECORDING, speed=20.0, start_ns=start_ns))
    store = SessionStore(tmp_path / "store.sqlite")
    spec = _spec(tmp_path, PY, "-c", "import time; time.sleep(1.5)", telemetry=True)
    out = runner.run_session(spec, store=store)
    assert out.kind is OutcomeKind.SUCCESS
    path = out.session_dir / "telemetry.csv"
    rec = read_recording(path)
    fixture = read_recording(RECORDING)
    n = len(rec)
    assert n > 5  # 20x replay of a 10 Hz recording during ~1.5 s
    # the rows are the recording's own samples, in order, with absolute (epoch) timestamps
    assert rec["power_w"].tolist() == fixture["power_w"].iloc[:n].tolist()
    assert rec["timestamp_ns"].iloc[0] == fixture["timestamp_ns"].iloc[0] + start_ns
    assert rec["timestamp_ns"].is_monotonic_increasing
    log = _log(out)
    assert "recording GPU telemetry every 0.1 s to telemetry.csv" in log
    assert f"GPU telemetry: {n} samples ({n} rows) in telemetry.csv" in log
    # the node it covers: this machine
    node = json.loads((out.session_dir / "telemetry.json").read_text())
    assert (node["node"], node["target"], node["source"]) == (socket.gethostname(), "local", "NVML")
    assert node["covers"] == f"the GPUs of node {socket.gethostname()} only"
    assert f"(it covers the GPUs of node {socket.gethostname()} only)" in log
    # the recording is not a report: the store lists only profiler reports
    assert all(not p.endswith("telemetry.csv") for p in store.get(out.session_id).reports)


def test_without_nvml_the_session_runs_and_says_why(tmp_path: Path) -> None:
    from engine.system.nvml import nvml_available

    ok, reason = nvml_available()
    if ok:  # pragma: no cover - only on a GPU machine
        pytest.skip("NVML works here; this test is for machines without a GPU")
    out = runner.run_session(_spec(tmp_path, PY, "-c", "print('ran')", telemetry=True),
                             store=SessionStore(tmp_path / "s.sqlite"))
    assert out.kind is OutcomeKind.SUCCESS
    assert f"GPU telemetry was not recorded: {reason}" in _log(out)
    assert not (out.session_dir / "telemetry.csv").exists()


def test_spec_keeps_telemetry_options_and_checks_the_period(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "true", telemetry=True, telemetry_period_s=0.25).validate()
    again = SessionSpec.from_dict(spec.to_dict())
    assert again.telemetry is True and again.telemetry_period_s == 0.25
    with pytest.raises(SpecError, match="telemetry period must be more than 0 seconds"):
        _spec(tmp_path, "true", telemetry=True, telemetry_period_s=0).validate()


def test_cli_run_telemetry_flag(tmp_path: Path) -> None:
    env_out = tmp_path / "out"
    cp = subprocess.run(
        [PY, "-m", "engine.cli", "run", "--telemetry", "--telemetry-period", "0.2", "--out", str(env_out),
         "--json", "--", PY, "-c", "print('hello')"],
        capture_output=True, text=True, timeout=120,
        env={**__import__("os").environ, "KERNELSCOPE_DATA": str(tmp_path / "data")})
    assert cp.returncode == 0, cp.stderr
    spec = next(env_out.glob("*/spec.json")).read_text()
    assert '"telemetry": true' in spec and '"telemetry_period_s": 0.2' in spec


def test_per_rank_job_says_which_node_its_telemetry_covers(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A torchrun job with --telemetry: the local node is recorded, and the note says other nodes are not."""
    from engine.telemetry.sources import ReplaySource
    from tests.engine import fake_tools
    from tests.engine.sessions.test_distributed_run import TORCHRUN, _job

    if not Path(TORCHRUN).exists():
        pytest.skip("torchrun (PyTorch) is not installed")
    monkeypatch.setattr(runner, "TELEMETRY_SOURCE_FACTORY",
                        lambda spec: ReplaySource(RECORDING, speed=20.0, start_ns=time.time_ns()))
    fake = fake_tools.install(tmp_path / "root")
    out = runner.run_session(_job(tmp_path, per_rank=True, telemetry=True), store=SessionStore(
        tmp_path / "s.sqlite"), env=fake_tools.env_for(fake))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    assert len(read_recording(out.session_dir / "telemetry.csv")) > 0
    node = json.loads((out.session_dir / "telemetry.json").read_text())
    assert node["node"] == socket.gethostname() and node["target"] == "local"
    assert "ranks that torchrun starts on other nodes are not sampled" in node["covers"]


def test_ssh_session_records_the_hosts_telemetry(tmp_path: Path, sshd) -> None:  # noqa: ANN001, F811
    """A session on an SSH host samples that host's GPUs through the agent (NVML stand-in there)."""
    from tests.conftest import REPO
    from tests.engine.sessions.test_remote import _target

    env = {"PYTHONPATH": f"{REPO / 'tests' / 'data' / 'fake_nvml'}:{REPO}", "FAKE_NVML_COSTS": "",
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}  # the agent's python3 on the host
    spec = _spec(tmp_path, "python3", "-c", "import time; time.sleep(2); print('remote ran')", telemetry=True,
                 telemetry_period_s=0.1, tool="bench", target=_target(sshd, tmp_path / "remote"), env=env)
    out = runner.run_session(spec, store=SessionStore(tmp_path / "s.sqlite"))
    assert out.kind is OutcomeKind.SUCCESS, out.message
    rec = read_recording(out.session_dir / "telemetry.csv")
    assert len(rec) >= 5 and set(rec["uuid"]) == {"GPU-fake-0000"} and not rec["gap"].any()
    node = json.loads((out.session_dir / "telemetry.json").read_text())
    # the node is the name the agent reported from the host (here the same machine, through sshd)
    assert node["node"] == socket.gethostname() and node["source"] == "the telemetry agent over ssh"
    assert node["target"] == spec.target.ssh_target().display
