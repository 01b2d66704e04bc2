"""Calibration: the measuring machinery on CPU, storage per GPU UUID, loading, the CLI without a GPU."""

import json

import pytest

from engine.cli import main
from engine.sessions.bench import BenchOptions
from engine.sessions.calibrate import (
    SCHEMA,
    Calibration,
    CalibrationError,
    calibration_path,
    load_calibration,
    normalize_uuid,
    save_calibration,
)

H200 = Calibration(
    gpu_uuid="GPU-5a1b2c3d-0000-1111-2222-333344445555", gpu_name="NVIDIA H200", device="cuda",
    measured_at="2026-11-01T00:00:00+00:00", torch_version="2.11.0+cu130", timer="cuda-events",
    copy_bytes=256 << 20, matmul_n=8192,
    # the fixture recording's numbers (telemetry/torch_workload_bench_h200.json), as a stored calibration
    h2d_pageable_bytes_per_s=7.144761749130623e9, h2d_pinned_bytes_per_s=55.01917226229257e9,
    d2h_pageable_bytes_per_s=13.678915156878594e9, d2h_pinned_bytes_per_s=54.85296038136935e9,
    bf16_flop_per_s=744.4585186215905e12,
)


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path))
    return tmp_path


def test_uuid_forms_and_paths(data):
    assert normalize_uuid("5a1b-22") == "GPU-5a1b-22"
    assert normalize_uuid("GPU-5a1b-22") == "GPU-5a1b-22"
    assert normalize_uuid("MIG-aa") == "MIG-aa" and normalize_uuid("CPU") == "cpu"
    assert calibration_path("5a1b-22") == data / "calibration" / "GPU-5a1b-22.json"


def test_save_and_load_round_trip(data):
    path = save_calibration(H200)
    assert path == data / "calibration" / "GPU-5a1b2c3d-0000-1111-2222-333344445555.json"
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and doc["h2d_pinned_bytes_per_s"] == 55.01917226229257e9
    assert doc["fp32_flop_per_s"] is None
    assert load_calibration("5a1b2c3d-0000-1111-2222-333344445555") == H200  # prefix optional
    assert load_calibration("GPU-5a1b2c3d-0000-1111-2222-333344445555") == H200
    assert load_calibration("GPU-other") is None
    # no NVML driver on this machine: uuid=None falls back to the most recent calibration stored
    assert load_calibration() == H200
    doc["a_future_field"] = 1
    path.write_text(json.dumps(doc))
    assert load_calibration(H200.gpu_uuid) == H200


def test_nothing_stored_and_damaged_files(data):
    assert load_calibration() is None
    bad = calibration_path("GPU-x")
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    with pytest.raises(CalibrationError, match="is damaged or not a Kernelscope calibration; delete it"):
        load_calibration("GPU-x")
    bad.write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(CalibrationError):
        load_calibration("GPU-x")


def test_unwritable_data_dir_is_one_sentence(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KERNELSCOPE_DATA", str(blocker))
    with pytest.raises(CalibrationError, match="set KERNELSCOPE_DATA to a writable folder"):
        save_calibration(H200)


torch = pytest.importorskip("torch")


def test_calibrate_cpu_measures_every_cpu_field(data):
    from engine.sessions.calibrate import calibrate

    seen = []
    cal = calibrate("cpu", BenchOptions(warmup=1, min_repeats=3, max_repeats=6, target_rel_ci=0.5,
                                        budget_s=0.3), progress=seen.append)
    assert seen == ["d2d_copy", "h2d_pageable_bytes_per_s", "d2h_pageable_bytes_per_s", "bf16_flop_per_s",
                    "fp16_flop_per_s", "fp32_flop_per_s"]
    assert cal.gpu_uuid == "cpu" and cal.device == "cpu" and cal.timer == "host"
    assert cal.copy_bytes == 8 << 20 and cal.matmul_n == 128
    assert cal.dram_bytes_per_s == pytest.approx(2 * cal.d2d_copy_bytes_per_s)
    for f in ("d2d_copy_bytes_per_s", "h2d_pageable_bytes_per_s", "d2h_pageable_bytes_per_s",
              "bf16_flop_per_s", "fp16_flop_per_s", "fp32_flop_per_s"):
        assert getattr(cal, f) > 0, f
    for f in ("h2d_pinned_bytes_per_s", "d2h_pinned_bytes_per_s", "tf32_flop_per_s"):
        assert getattr(cal, f) is None  # no pinned memory or TF32 on a CPU
    save_calibration(cal)
    assert load_calibration("cpu") == cal


def test_cli_calibrate(data, capsys):
    assert main(["calibrate"]) == 1  # no GPU here
    err = capsys.readouterr().err.strip()
    assert err == ("kernelscope: There is no CUDA GPU here to calibrate (PyTorch sees none); run "
                   "`kernelscope calibrate` on the GPU machine, or --device cpu to test.")
    assert not (data / "calibration").exists()
    assert main(["calibrate", "--device", "cpu", "--budget", "0.2", "--json"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["schema"] == SCHEMA and doc["gpu_uuid"] == "cpu" and doc["fp32_flop_per_s"] > 0
    assert f"saved {data / 'calibration' / 'cpu.json'}" in out.err
    assert load_calibration("cpu") == Calibration.from_dict(doc)
