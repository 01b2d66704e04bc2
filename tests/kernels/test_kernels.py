"""kernels/: the registry API, every workload run for real on CPU at tiny sizes, standalone runs."""

import contextlib
import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.registry import (
    Work,
    WorkloadError,
    WorkloadParamError,
    WorkloadUnavailable,
    get_workload,
    list_workloads,
    parse_param_args,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT.parent / "shared" / "fixtures"
if not FIXTURES.exists():
    FIXTURES = Path("/work/shared/fixtures")
H200_BENCH = FIXTURES / "telemetry" / "torch_workload_bench_h200.json"


def test_registry_lists_the_seed_workloads():
    names = [w.name for w in list_workloads()]
    assert names == ["host_overhead", "host_overhead_cuda", "bandwidth", "sdpa", "gemm", "triton_matmul"]
    for w in list_workloads():
        assert w.module == f"kernels.{w.name}" and w.description
        assert w.params["device"] == "cuda" and set(w.param_help) == set(w.params)


def test_registry_needs_no_torch_to_import():
    code = ("import sys, kernels.registry as r; r.get_workload('sdpa').argv({'S': '64'}); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


def test_argv_and_resolve():
    w = get_workload("sdpa")
    assert w.argv({"S": "4096", "D": "128", "H": "96", "B": "16"}) == [
        sys.executable, "-m", "kernels.sdpa", "--param", "B=16", "--param", "H=96", "--param", "S=4096",
        "--param", "D=128", "--param", "dtype=fp16", "--param", "causal=0", "--param", "device=cuda",
        "--param", "iters=20", "--param", "warmup=5", "--param", "rotate=1"]
    assert w.resolve()["S"] == "512"
    with pytest.raises(WorkloadParamError, match="has no parameter 'X'; its parameters are: B, H, S"):
        w.resolve({"X": "1"})
    with pytest.raises(WorkloadParamError, match="choose one of: fp16, bf16, fp32"):
        w.resolve({"dtype": "int8"})
    with pytest.raises(WorkloadError, match="known workloads: host_overhead, host_overhead_cuda"):
        get_workload("attention")
    assert parse_param_args(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(WorkloadParamError, match="not of the form name=value"):
        parse_param_args(["novalue"])


def test_work_formulas_reproduce_the_h200_recording():
    """torch_workload.py measured SDPA and GEMM on the H200; our FLOP counts give its TFLOP/s."""
    h200 = json.loads(H200_BENCH.read_text())
    sdpa = get_workload("sdpa").work()  # defaults: the seed shape B=32 H=8 S=512 D=64 fp16
    assert sdpa == Work(flop=4 * 32 * 8 * 512 * 512 * 64, bytes=4 * 32 * 8 * 512 * 64 * 2)
    assert sdpa.flop / (h200["sdpa_ms_median"] * 1e-3) / 1e12 == pytest.approx(h200["sdpa_tflops"], rel=1e-12)
    assert get_workload("sdpa").work({"causal": "1"}).flop == sdpa.flop / 2
    gemm = get_workload("gemm").work()  # defaults: 8192^3 bf16 as recorded
    assert gemm.flop == 2 * 8192**3
    recorded_ms = 2 * 8192**3 / (h200["gemm_tflops"] * 1e12) * 1e3
    assert 1.0 < recorded_ms < 2.0  # 744 TFLOP/s on 8192^3 is ~1.48 ms per GEMM
    assert get_workload("bandwidth").work().bytes == 256 << 20  # the recording's 256 MiB copies


try:
    import torch
except ImportError:  # the registry tests above need no torch
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


@needs_torch
@pytest.mark.parametrize("dtype,tol", [("fp32", 1e-5), ("fp64", 1e-12), ("bf16", 2e-2), ("fp16", 1e-2)])
def test_gemm_on_cpu_matches_reference(dtype, tol):
    from engine.sessions.bench import relative_error

    fn, ref = get_workload("gemm").make({"M": "33", "N": "17", "K": "65", "dtype": dtype}, device="cpu")
    out = fn()
    names = {"fp32": "float32", "fp64": "float64", "bf16": "bfloat16", "fp16": "float16"}
    assert out.shape == (33, 17) and out.dtype == getattr(torch, names[dtype])
    err = relative_error(out, ref())
    assert 0 <= err < tol
    if dtype in ("bf16", "fp16"):
        assert err > 1e-5  # the reference really is higher precision


@needs_torch
@pytest.mark.parametrize("causal", ["0", "1"])
def test_sdpa_on_cpu_matches_textbook_attention(causal):
    from engine.sessions.bench import relative_error

    fn, ref = get_workload("sdpa").make(
        {"B": "2", "H": "3", "S": "16", "D": "8", "dtype": "fp32", "causal": causal, "device": "cpu"})
    out = fn()
    assert out.shape == (2, 3, 16, 8)
    assert relative_error(out, ref()) < 1e-5
    if causal == "1":  # the mask changes the result
        fn2, _ = get_workload("sdpa").make(
            {"B": "2", "H": "3", "S": "16", "D": "8", "dtype": "fp32", "causal": "0", "device": "cpu"})
        assert not torch.allclose(out, fn2())


@needs_torch
def test_rotation_cycles_inputs_and_reference_follows():
    from engine.sessions.bench import relative_error

    fn, ref = get_workload("gemm").make({"M": "8", "N": "8", "K": "8", "dtype": "fp32", "rotate": "3"},
                                        device="cpu")
    outs = []
    for _ in range(4):
        outs.append(fn().clone())
        assert relative_error(outs[-1], ref()) < 1e-6
    assert not torch.equal(outs[0], outs[1]) and not torch.equal(outs[1], outs[2])
    assert torch.equal(outs[0], outs[3])  # back to the first input set


@needs_torch
@pytest.mark.parametrize("direction", ["h2d", "d2h"])
def test_bandwidth_copies_exactly_on_cpu(direction):
    fn, ref = get_workload("bandwidth").make(
        {"direction": direction, "memory": "pageable", "size_mb": "2"}, device="cpu")
    out = fn()
    assert out.numel() * 4 == 2 << 20 and torch.equal(out, ref())
    assert out[-1].item() == (2 << 20) // 4 - 1
    with pytest.raises(WorkloadUnavailable, match="Pinned host memory needs a CUDA GPU"):
        get_workload("bandwidth").make({"memory": "pinned", "size_mb": "1"}, device="cpu")


@needs_torch
@pytest.mark.parametrize("variant", ["naive", "fixed"])
def test_host_overhead_twin_computes_the_demo_product(variant):
    fn, ref = get_workload("host_overhead").make({"variant": variant, "n": "48", "vec": "1000"}, device="cpu")
    c = fn()
    # the CUDA demo's own check: C[0][0] = sum_k A[0][k] * B[k][0], A = (i % 7) / 4, B = (i % 5) / 2
    n = 48
    c00 = sum(((k % 7) * 0.25) * (((k * n) % 5) * 0.5) for k in range(n))
    assert c[0, 0].item() == pytest.approx(c00, rel=1e-6)
    assert torch.allclose(c.double(), ref(), rtol=1e-6)


@needs_torch
def test_host_overhead_nvtx_ranges_match_the_h200_recordings(monkeypatch):
    """The twin opens the same NVTX ranges as the CUDA program in the fixture recordings."""
    import sqlite3

    import kernels._common as common

    for variant in ("naive", "fixed"):
        seen = []

        @contextlib.contextmanager
        def record(name, seen=seen):
            seen.append(name)
            yield

        monkeypatch.setattr(common, "nvtx_range", record)  # no GPU here: record the names NVTX would get
        fn, _ = get_workload("host_overhead").make({"variant": variant, "n": "8", "vec": "10"}, device="cpu")
        fn()
        path = FIXTURES / "nsys" / f"host_overhead_{variant}.sqlite"
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        recorded = [r[0] for r in db.execute(
            "SELECT coalesce(s.value, n.text) FROM NVTX_EVENTS n LEFT JOIN StringIds s ON n.textId = s.id "
            "WHERE n.eventType = 59 ORDER BY n.start")]
        per_iteration = len(recorded) // 5  # the recordings ran 5 iterations
        assert seen == recorded[:per_iteration]
        assert seen[0] == f"iteration({variant})"


@needs_torch
def test_cuda_only_workloads_refuse_cpu_in_one_sentence(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(WorkloadUnavailable) as exc:
        get_workload("triton_matmul").make({"M": "16", "N": "16", "K": "16"}, device="cpu")
    assert str(exc.value) == ("The Triton matmul runs only on a CUDA GPU (or on CPU under Triton's "
                              "interpreter, TRITON_INTERPRET=1).")
    with pytest.raises(WorkloadUnavailable, match="runs only on a CUDA GPU"):
        get_workload("host_overhead_cuda").make({}, device="cpu")
    with pytest.raises(WorkloadUnavailable, match="pass --param device=cpu"):
        get_workload("gemm").make({"M": "8", "N": "8", "K": "8"})  # device=cuda, and there is none


@needs_torch
def test_cuda_demo_source_and_build_command():
    from kernels import host_overhead_cuda as demo

    assert demo.SOURCE.read_bytes() == (FIXTURES / "src" / "host_overhead.cu").read_bytes()
    assert demo.build_argv("/usr/local/cuda/bin/nvcc", Path("/s/h.cu"), Path("/o/h"), "sm_90") == [
        "/usr/local/cuda/bin/nvcc", "-O2", "-lineinfo", "-std=c++17", "-arch=sm_90", "-o", "/o/h", "/s/h.cu"]
    p = get_workload("host_overhead_cuda").resolve({"variant": "fixed", "iters": "5"})
    assert demo.run_argv(Path("/o/h"), p) == ["/o/h", "fixed", "5", "2048"]


@needs_torch
def test_standalone_run_from_registry_argv():
    w = get_workload("gemm")
    argv = w.argv({"device": "cpu", "M": "16", "N": "16", "K": "16", "dtype": "fp32", "iters": "3",
                   "warmup": "1"}) + ["--json"]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["workload"] == "gemm" and doc["iters"] == 3 and doc["params"]["M"] == "16"
    assert doc["rel_err"] < 1e-6 and 0 < doc["min_ms"] <= doc["median_ms"]


@needs_torch
def test_standalone_run_without_gpu_is_one_sentence():
    out = subprocess.run([sys.executable, "-m", "kernels.sdpa"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip() == ("kernels.sdpa: No CUDA GPU is visible to PyTorch; run on a GPU machine or "
                                  "pass --param device=cpu.")


@needs_torch
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton is not installed")
def test_triton_matmul_under_the_interpreter_matches_torch():
    """The real Triton kernel, run by Triton's CPU interpreter (odd sizes exercise the masks)."""
    w = get_workload("triton_matmul")
    argv = w.argv({"device": "cpu", "M": "40", "N": "48", "K": "72", "block_m": "16", "block_n": "16",
                   "block_k": "16", "iters": "1", "warmup": "0"}) + ["--json"]
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert 0 < doc["rel_err"] < 1e-2  # fp16 output vs the fp32 torch product


@needs_torch
def test_sdpa_reference_in_chunks_equals_one_pass(monkeypatch):
    import kernels.sdpa as sdpa
    from engine.sessions.bench import relative_error

    params = {"B": "2", "H": "3", "S": "16", "D": "8", "dtype": "fp32", "causal": "1", "device": "cpu"}
    fn, ref = get_workload("sdpa").make(params)
    fn()
    whole = ref()
    monkeypatch.setattr(sdpa, "REF_CHUNK_BYTES", 16 * 16 * 4)  # one head at a time: 6 chunks
    fn, ref = get_workload("sdpa").make(params)
    out = fn()
    assert torch.equal(ref(), whole)
    assert relative_error(out, whole) < 1e-5


@needs_torch
def test_relative_error_in_chunks_equals_numpy():
    from engine.sessions.bench import _relative_error_torch, relative_error

    g = torch.Generator().manual_seed(3)
    ref = torch.randn(5, 7, generator=g)
    out = ref + 0.01 * torch.randn(5, 7, generator=g)
    expected = relative_error(out.numpy(), ref.numpy())  # numpy path
    assert _relative_error_torch(out, ref, chunk=4) == pytest.approx(expected, rel=1e-12)
    assert relative_error(out.half(), ref) == pytest.approx(
        relative_error(out.half().float().numpy(), ref.numpy()), rel=1e-12)
    bad = out.clone()
    bad[4, 6] = float("nan")  # in the last chunk
    assert math.isnan(_relative_error_torch(bad, ref, chunk=4))


def test_cuda_demo_without_nvcc_is_one_sentence(monkeypatch, tmp_path):
    from kernels import host_overhead_cuda as demo

    monkeypatch.setattr(demo.shutil, "which", lambda name: None)
    monkeypatch.setattr(demo.Path, "glob", lambda self, pattern: iter(()))
    with pytest.raises(WorkloadUnavailable, match=r"needs nvcc \(the CUDA toolkit\); put it on PATH"):
        demo.build(tmp_path)
    assert demo.binary_path(tmp_path).name.startswith("host_overhead-")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_demo_builds_once_and_reports_a_missing_gpu(monkeypatch, tmp_path):
    from kernels import host_overhead_cuda as demo

    monkeypatch.setenv("KERNELSCOPE_CUDA_ARCH", "sm_90")  # no GPU here for -arch=native to find
    binary = demo.build(tmp_path)
    assert binary == demo.binary_path(tmp_path) and binary.stat().st_size > 0
    mtime = binary.stat().st_mtime_ns
    assert demo.build(tmp_path) == binary and binary.stat().st_mtime_ns == mtime  # cached
    monkeypatch.setattr(demo, "build", lambda: binary)
    fn, ref = get_workload("host_overhead_cuda").make({"variant": "naive", "n": "64", "iters": "1"})
    assert ref is None
    failed = r"The host-overhead demo failed \(exit 1\): .*host_overhead.cu:\d+ "
    with pytest.raises(WorkloadError, match=failed):
        fn()  # this machine has no GPU/driver: the program's own CUDA error comes back in the sentence
