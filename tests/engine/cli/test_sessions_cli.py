"""kernelscope run / sessions end to end (real subprocesses, a private store)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from engine.cli import main

PY = sys.executable


@pytest.fixture(autouse=True)
def _data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path / "data"))


def test_run_then_list_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "out")
    assert main(["run", "--out", out, "--", PY, "-c", "print('hello from the app')"]) == 0
    cap = capsys.readouterr()
    assert "hello from the app" in cap.out and "success" in cap.err
    assert main(["run", "--out", out, "--json", "--", PY, "-c", "import sys; sys.exit(4)"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "crashed" and doc["returncode"] == 4 and Path(doc["log"]).is_file()
    assert main(["sessions", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kind"] for r in rows] == ["crashed", "success"]
    assert main(["sessions", rows[1]["id"][:20]]) in (0, 1)  # prefix may be ambiguous within a second
    assert main(["sessions", rows[1]["id"]]) == 0
    assert "hello" not in capsys.readouterr().err


def test_run_failures_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--out", "/sys/ks-out", "--", PY, "-c", "pass"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kernelscope: Cannot write the session folder /sys/ks-out (it is read-only or not "
                   "writable "
                   "by you); choose another output folder with --out."]
    assert main(["run", "no_such_workload", "--param", "a=1"]) == 1
    assert "no_such_workload" in capsys.readouterr().err
    assert main(["run"]) == 1
    assert "Nothing to run" in capsys.readouterr().err
    assert main(["run", "sdpa", "--param", "novalue"]) == 1
    assert "is not KEY=VALUE" in capsys.readouterr().err
    assert main(["sessions", "nope"]) == 1
    assert "No session matches 'nope'" in capsys.readouterr().err


def test_run_workload_options_after_name() -> None:
    from engine.cli import build_parser
    from engine.cli.sessions import _spec_from_args

    args = build_parser().parse_args(
        ["run", "--timeout", "60", "sdpa", "--param", "S=1024", "--tool", "ncu", "--launch-count", "1",
         "--out", "o"])
    spec = _spec_from_args(args)
    assert (spec.workload, spec.params, spec.tool, spec.ncu.launch_count, spec.out_dir, spec.timeout_s) == (
        "sdpa", {"S": "1024"}, "ncu", 1, "o", 60.0)
    assert spec.ncu.clock_control == "none" and spec.command == ()
    args = build_parser().parse_args(
        ["run", "--tool", "nsys", "--gpu-metrics", "0", "--", "./app", "--x", "1"])
    spec = _spec_from_args(args)
    assert spec.command == ("./app", "--x", "1") and spec.nsys.gpu_metrics_devices == "0"


def test_ctrl_c_cancels_the_session_and_its_children(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import time

    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('child', c.pid, flush=True)\ntime.sleep(60)")
    env = {**os.environ, "KERNELSCOPE_DATA": str(tmp_path / "data")}
    argv = [PY, "-m", "engine.cli", "run", "--out", str(tmp_path / "o"), "--", PY, "-c", code]
    proc = subprocess.Popen(argv,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=Path(__file__).resolve().parents[3])
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("child ")
    child = int(line.split()[1])
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the CLI
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert err.strip().splitlines()[-1].startswith("kernelscope: The session was cancelled after")
    time.sleep(0.5)
    assert not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"


def test_run_ncu_refused_counters_explains_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.sessions.ncu_logs import explain_ncu_log
    from tests.engine import fake_tools

    fake = fake_tools.install(tmp_path / "root")
    for key, value in fake_tools.env_for(fake, "perm").items():
        monkeypatch.setenv(key, value)
    code = main(["run", "--tool", "ncu", "--tool-path", str(fake.ncu), "--out", str(tmp_path / "out"), "--",
                 PY, "-c", "pass"])
    assert code == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == "kernelscope: " + explain_ncu_log("ERR_NVGPUCTRPERM")  # type: ignore[operator]
    assert "CAP_SYS_ADMIN" in last and "NVreg_RestrictProfilingToAdminUsers=0" in last
