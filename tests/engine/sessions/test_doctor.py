"""kernelscope doctor: tool discovery on fake installs, no tools at all, no GPU, permissions; the CLI."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.sessions import doctor as D
from tests.engine import fake_tools


def test_tools_found_in_the_nsight_compute_layout(tmp_path: Path) -> None:
    fake = fake_tools.install(tmp_path)
    env = {"PATH": str(tmp_path / "nobin"), "KERNELSCOPE_TOOL_ROOT": str(tmp_path)}
    checks = {c.name: c for c in D.check_tools(env)}
    assert (checks["nsys"].status, checks["nsys"].version, checks["nsys"].path) == (
        "ok", "2025.3.1.90", str(fake.nsys))
    assert "inside Nsight Compute" in checks["nsys"].detail
    ncu = checks["ncu"]
    assert (ncu.status, ncu.version, ncu.path) == ("ok", "2025.3.1.0", str(fake.ncu))
    assert (checks["QdstrmImporter"].status, checks["QdstrmImporter"].path) == ("ok", str(fake.importer))
    assert checks["nvcc"].status == "missing"


def test_nothing_installed_says_what_each_absence_means(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "KERNELSCOPE_TOOL_ROOT": str(tmp_path)}
    checks = {c.name: c for c in D.check_tools(env)}
    assert [c.status for c in checks.values()] == ["missing", "missing", "missing"]
    assert "timeline profiling (--tool nsys) and opening .nsys-rep files are unavailable" in \
        checks["nsys"].detail
    assert "set NCU=/path/to/ncu" in checks["ncu"].detail
    assert "CUDA C++ workloads in kernels/ cannot be built" in checks["nvcc"].detail


def test_old_nsys_is_a_warning(tmp_path: Path) -> None:
    old = tmp_path / "bin" / "nsys"
    old.parent.mkdir()
    old.write_text(f"#!{sys.executable}\nprint('NVIDIA Nsight Systems version 2022.4.2.1-df9881f')\n")
    old.chmod(0o755)
    env = {"PATH": str(old.parent), "KERNELSCOPE_TOOL_ROOT": str(tmp_path)}
    checks = {c.name: c for c in D.check_tools(env)}
    assert checks["nsys"].status == "warning" and "(2022.4.2.1) is old" in checks["nsys"].detail
    assert checks["QdstrmImporter"].status == "warning"


def test_importer_discovery_and_env(tmp_path: Path) -> None:
    fake = fake_tools.install(tmp_path)
    assert D.qdstrm_importer_candidates(fake.nsys, {}) == [fake.importer]
    other = tmp_path / "elsewhere" / "QdstrmImporter"
    other.parent.mkdir()
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    assert D.find_qdstrm_importer(fake.nsys, {"KERNELSCOPE_IMPORTER": str(other)}) == other
    assert D.importer_env({"KERNELSCOPE_IMPORTER_LIBS": "/kit", "LD_LIBRARY_PATH": "/a"})["LD_LIBRARY_PATH"] \
        == "/kit:/a"
    assert "LD_LIBRARY_PATH" not in D.importer_env({"PATH": "/bin"})


def test_no_gpu_here_is_a_finding() -> None:
    checks = D.check_gpus()
    assert [c.name for c in checks] == ["driver"] and checks[0].status == "missing"
    assert checks[0].detail.startswith("No GPU can be used here: ") and "--replay" not in checks[0].detail


def test_permissions_from_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "driver" / "nvidia" / "params").write_text(
        "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "perf_event_paranoid").write_text("4\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # an ordinary user
    counters, perf = D.check_permissions(str(tmp_path))
    assert counters.status == "warning" and "ERR_NVGPUCTRPERM" in counters.detail
    assert perf.status == "warning" and perf.version == "4" and "perf_event_paranoid=2" in perf.detail
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    counters, perf = D.check_permissions(str(tmp_path))
    assert (counters.status, perf.status) == ("ok", "ok") and "(as root)" in counters.detail


def test_parse_remote_probe() -> None:
    text = ("which nsys=\nwhich ncu=/usr/local/bin/ncu\nwhich nvcc=\nwhich python3=/usr/bin/python3\n"
            "which nvidia-smi=/usr/bin/nvidia-smi\n"
            "found nsys=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys\n"
            "gpu=0, NVIDIA H200, 143771 MiB, 580.159.04\ntorch=2.11.0+cu130\nparanoid=4\n")
    checks = {c.name: c for c in D.parse_remote_probe(text)}
    assert checks["nsys"].status == "warning" and "--tool-path /opt/nvidia" in checks["nsys"].detail
    assert checks["ncu"].path == "/usr/local/bin/ncu" and checks["nvcc"].status == "missing"
    assert checks["torch"].version == "2.11.0+cu130"
    assert checks["gpu 0"].detail == "0, NVIDIA H200, 143771 MiB, 580.159.04"
    assert checks["perf events"].status == "warning"


def test_doctor_cli_json_and_table(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_tools.install(tmp_path)
    monkeypatch.setenv("NCU", str(fake.ncu))
    assert main(["doctor", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["ncu"]["path"] == str(fake.ncu) and rows["driver"]["status"] == "missing"
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "ok ncu" in out and "-- driver" in out
