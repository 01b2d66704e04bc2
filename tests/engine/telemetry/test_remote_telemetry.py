"""Remote telemetry: the agent's JSON lines, RemoteSource through a local subprocess and through a
real sshd, reconnect after the agent dies. NVML is the stand-in in tests/data/fake_nvml (no GPU here),
which replays the real H200 recording."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from engine.system.ssh import SshTarget
from engine.telemetry.agent import snapshot_from_json, snapshot_to_json
from engine.telemetry.errors import TelemetryUnavailable
from engine.telemetry.recording import read_recording
from engine.telemetry.remote import RemoteSource, agent_command, ssh_agent_argv
from engine.telemetry.sampler import Sampler
from engine.telemetry.snapshot import Snapshot
from engine.telemetry.sources import ReplaySource
from tests.conftest import FIXTURES, REPO
from tests.engine.sshd_fixture import Sshd, sshd  # noqa: F401  (fixture)

H200 = FIXTURES / "telemetry" / "telemetry_h200.csv"
pytestmark = pytest.mark.skipif(not H200.is_file(), reason="shared fixtures missing")
FAKE_ENV = {"PYTHONPATH": f"{REPO / 'tests' / 'data' / 'fake_nvml'}:{REPO}", "FAKE_NVML_COSTS": ""}
AGENT = [sys.executable, "-m", "engine.telemetry.agent", "--period", "0.05"]


def test_agent_argv_exact() -> None:
    assert agent_command(0.1, "0,2") == ["python3", "-m", "engine.telemetry.agent", "--period", "0.1",
                                        "--gpu", "0,2"]
    argv = ssh_agent_argv(SshTarget("gpu1", user="ana", port=2200), 0.5, "all", "/opt/py/bin/python",
                          remote_dir="/srv/kernel scope", remote_env={"FOO": "a b"})
    remote = ("cd '/srv/kernel scope' && env 'FOO=a b' /opt/py/bin/python -m engine.telemetry.agent "
              "--period 0.5 --gpu all")
    assert argv[0] == "ssh" and argv[-3:] == ["--", "gpu1", remote]
    assert argv[argv.index("-p") + 1] == "2200" and argv[argv.index("-l") + 1] == "ana"


def test_json_lines_round_trip_every_field() -> None:
    src = ReplaySource(H200, speed=0, start_ns=1_795_654_038_906_226_929)
    src.open()
    snaps = [s for s in iter(lambda: src.read(), None)]
    for s in snaps:
        assert snapshot_from_json(snapshot_to_json(s)) == s
    gap = Snapshot(5, (), gap=True, gap_reason="GPU 0: lost")
    assert snapshot_from_json(snapshot_to_json(gap)) == gap
    with pytest.raises(ValueError):
        snapshot_from_json('{"hello": 1}')


def test_agent_reports_no_driver_as_its_hello() -> None:
    out = subprocess.run(AGENT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
                         env={**FAKE_ENV, "FAKE_NVML_NO_DRIVER": "1", "PATH": "/usr/bin:/bin"}, cwd=REPO)
    hello = json.loads(out.stdout.splitlines()[0])
    assert out.returncode == 1 and hello["ok"] is False
    assert hello["reason"].startswith("Telemetry is unavailable: no NVIDIA driver")
    src = RemoteSource(AGENT, "gpu-box", env={**FAKE_ENV, "FAKE_NVML_NO_DRIVER": "1"})
    with pytest.raises(TelemetryUnavailable, match=r"^On gpu-box: Telemetry is unavailable: no NVIDIA"):
        src.open()


class Collector:
    """Subscribed before the sampler starts, so no snapshot is missed."""

    def __init__(self, sampler: Sampler) -> None:
        self.got: list[Snapshot] = []
        self.cond = threading.Condition()
        sampler.subscribe(self.on)

    def on(self, s: Snapshot) -> None:
        with self.cond:
            self.got.append(s)
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float = 60) -> list[Snapshot]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= n, timeout), f"only {len(self.got)} snapshots"
            return list(self.got)


def test_local_agent_streams_the_recordings_values_and_reconnects_after_a_kill() -> None:
    rows = read_recording(H200)
    src = RemoteSource(AGENT, "local", env=FAKE_ENV)
    sampler = Sampler(src)
    col = Collector(sampler)
    with sampler:
        first = col.wait_for(5)[:5]
        assert src.hello["ok"] and "NVML ready" in src.hello["reason"]
        g = [s.gpus[0] for s in first]
        assert not any(s.gap for s in first) and g[0].name == "NVIDIA H200 (stand-in)"
        # the stand-in answers row k on its k-th reading: the agent's values are the recording's
        assert [x.power_w for x in g] == list(rows["power_w"].iloc[1:6])
        assert [x.sm_clock_mhz for x in g] == list(rows["sm_clock_mhz"].iloc[1:6])
        assert src.proc is not None
        src.proc.kill()  # the agent dies (or the connection drops)
        after = col.wait_for(len(col.got) + 6)[5:]
    assert not sampler.running and src.proc is None
    gaps = [s for s in after if s.gap]
    assert gaps and "Lost the connection to local" in (gaps[0].gap_reason or "")
    resumed = [s for s in after[after.index(gaps[-1]):] if not s.gap]
    assert resumed and resumed[0].gpus[0].power_w == rows["power_w"].iloc[1]  # a fresh agent, from row 1
    assert src.reconnects == 1
    ts = [s.timestamp_ns for s in resumed]
    assert ts == sorted(ts) and ts[0] > first[-1].timestamp_ns


def test_agent_through_a_real_sshd(sshd: Sshd) -> None:  # noqa: F811
    src = RemoteSource.over_ssh(sshd.target(), period_s=0.05, python=sys.executable, remote_dir=str(REPO),
                                remote_env=FAKE_ENV)
    t0 = time.time_ns()
    sampler = Sampler(src)
    col = Collector(sampler)
    with sampler:
        snaps = col.wait_for(4)
    assert src.hello["ok"] and not any(s.gap for s in snaps)
    assert all(s.timestamp_ns >= t0 and s.gpus[0].uuid == "GPU-fake-0000" for s in snaps)
    assert src.proc is None  # closed: ssh and the agent are gone


def test_sshd_refusing_the_key_is_sshs_sentence(sshd: Sshd, tmp_path) -> None:  # noqa: F811
    from tests.engine.sshd_fixture import keygen

    keygen(tmp_path / "other")
    src = RemoteSource.over_ssh(sshd.target(identity_file=tmp_path / "other"), python=sys.executable,
                                remote_dir=str(REPO), remote_env=FAKE_ENV)
    with pytest.raises(TelemetryUnavailable) as err:
        src.open()
    assert "key" in str(err.value).lower() and "\n" not in str(err.value)


def test_cli_host_through_sshd_records(sshd: Sshd, tmp_path, monkeypatch, capsys) -> None:  # noqa: F811
    from engine.cli import main
    from engine.system import ssh as ssh_mod

    target = sshd.target()
    monkeypatch.setattr(ssh_mod, "parse_target", lambda text: target)  # the fixture's key and known_hosts
    for k, v in FAKE_ENV.items():  # the agent inherits nothing through ssh: give it the stand-in there
        monkeypatch.setenv(k, v)
    out = tmp_path / "remote.csv"
    monkeypatch.setattr("engine.telemetry.remote.agent_command", lambda p, g, py: [
        "env", *(f"{k}={v}" for k, v in FAKE_ENV.items()), py, "-m", "engine.telemetry.agent",
        "--period", f"{p:g}", "--gpu", g])
    rc = main(["telemetry", "--host", "ignored", "--remote-python", sys.executable, "--remote-dir", str(REPO),
               "--period", "0.05", "--duration", "3", "--record", str(out)])
    assert rc == 0, capsys.readouterr().err
    rec = read_recording(out)
    assert len(rec) >= 5 and set(rec["uuid"]) == {"GPU-fake-0000"} and not rec["gap"].any()
