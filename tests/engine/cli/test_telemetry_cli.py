from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from engine.cli.telemetry import register
from engine.system.nvml import nvml_available
from engine.telemetry.recording import read_recording
from tests.conftest import FIXTURES

H200 = FIXTURES / "telemetry" / "telemetry_h200.csv"
pytest.importorskip("pynvml")


def _run(*argv: str) -> int:
    p = argparse.ArgumentParser(prog="kernelscope")
    register(p.add_subparsers(dest="command"))
    args = p.parse_args(["telemetry", *argv])
    rc: int = args.func(args)
    return rc


def test_no_driver_prints_one_sentence_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    if nvml_available()[0]:
        pytest.skip("this machine has a working NVIDIA driver")
    assert _run("--duration", "0.1") == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kernelscope: Telemetry is unavailable:") and err.count("\n") == 0


@pytest.mark.skipif(not H200.is_file(), reason="shared fixtures missing")
def test_replay_fixture_and_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "again.csv"
    assert _run("--replay", str(H200), "--speed", "0", "--record", str(out)) == 0
    assert "wrote 127 rows" in capsys.readouterr().err
    df, orig = read_recording(out), read_recording(H200)
    assert len(df) == 127
    assert df["power_w"].tolist() == orig["power_w"].tolist()
    assert df["timestamp_ns"].tolist() == orig["timestamp_ns"].tolist()


def test_bad_gpu_argument(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--gpu", "first") == 1
    assert "--gpu takes 'all'" in capsys.readouterr().err
