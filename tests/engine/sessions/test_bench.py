"""The benchmark harness on real CPU runs (torch CPU wheel): stopping rules, correctness, output files."""

import csv
import io
import json
import math
import time

import pytest

torch = pytest.importorskip("torch")

from engine.cli import main  # noqa: E402
from engine.sessions.bench import (  # noqa: E402
    HOST_TIMER_NOTE,
    BenchError,
    BenchOptions,
    check_output,
    expand_sweep,
    format_table,
    measure,
    relative_error,
    results_csv,
    results_json,
    run_sweep,
    run_workload,
    tolerance_for,
    write_results,
)

QUICK = BenchOptions(warmup=1, min_repeats=3, max_repeats=20, target_rel_ci=0.5, budget_s=0.5)
TINY_GEMM = {"device": "cpu", "M": "24", "N": "16", "K": "8"}


def test_host_timer_measures_a_known_sleep():
    r = measure(lambda: time.sleep(0.002), None, options=BenchOptions(
        warmup=1, min_repeats=5, max_repeats=8, target_rel_ci=1e-9, budget_s=30))
    assert r.timer == "host" and r.timer_note == HOST_TIMER_NOTE
    assert r.stats.n == 8 and r.stop_reason == "max-repeats" and len(r.samples_ns) == 8
    assert r.stats.min >= 2_000_000  # sleep(2 ms) never returns early
    assert r.stats.median == sorted(r.samples_ns)[3] / 2 + sorted(r.samples_ns)[4] / 2
    assert r.check.ok is None and r.check.note == "no reference"


def test_stops_on_ci_target_and_on_time_budget():
    r = measure(lambda: time.sleep(0.001), None, options=BenchOptions(
        warmup=1, min_repeats=4, max_repeats=10_000, target_rel_ci=0.5, budget_s=30))
    assert r.stop_reason == "ci-target" and r.stats.n >= 4
    assert r.stats.rel_ci95_half_width <= 0.5
    t0 = time.perf_counter()
    r = measure(lambda: time.sleep(0.001), None, options=BenchOptions(
        warmup=1, min_repeats=2, max_repeats=10_000, target_rel_ci=1e-12, budget_s=0.2))
    assert r.stop_reason == "time-budget"
    assert 0.2 <= time.perf_counter() - t0 < 2.0
    assert r.stats.n == len(r.samples_ns) < 10_000


def test_bad_options_are_sentences():
    with pytest.raises(BenchError, match="warmup >= 1"):
        measure(lambda: None, None, options=BenchOptions(warmup=0))
    with pytest.raises(BenchError, match="device=cuda"):
        measure(lambda: None, None, options=BenchOptions(timer="cuda"))


def test_relative_error_and_tolerances():
    ref = torch.tensor([3.0, 4.0])  # norm 5
    assert relative_error(ref * 1.1, ref) == pytest.approx(0.1, rel=1e-6)
    assert relative_error(torch.tensor([3.0, 5.0]), ref) == pytest.approx(1 / 5)
    assert relative_error(torch.tensor([0.5, 0.0]), torch.zeros(2)) == 0.5  # zero reference: absolute
    assert math.isnan(relative_error(torch.tensor([float("nan"), 4.0]), ref))
    assert math.isnan(relative_error(torch.tensor([float("inf"), 4.0]), ref))
    with pytest.raises(BenchError, match="shape"):
        relative_error(torch.zeros(3), ref)
    assert tolerance_for(torch.zeros(1, dtype=torch.bfloat16)) == 2e-2
    assert tolerance_for(torch.zeros(1, dtype=torch.float16)) == 1e-2
    assert tolerance_for(torch.zeros(1)) == 1e-4
    assert tolerance_for(torch.zeros(1), {"dtype": "tf32"}) == 5e-3
    assert tolerance_for(torch.zeros(1, dtype=torch.float64)) == 1e-10


def test_nan_and_wrong_results_fail_the_check_but_still_time():
    a = torch.randn(32, 32, generator=torch.Generator().manual_seed(1))
    nan = measure(lambda: a @ a * float("nan"), lambda: a @ a, options=QUICK)
    assert nan.check.ok is False and math.isnan(nan.check.rel_err) and "NaN" in nan.check.note
    assert nan.stats.n >= 3
    wrong = measure(lambda: (a @ a) * 1.001, lambda: a @ a, options=QUICK)
    assert wrong.check.ok is False and wrong.check.rel_err == pytest.approx(1e-3, rel=1e-3)
    assert "exceeds tolerance 0.0001" in wrong.check.note
    loose = measure(lambda: (a @ a) * 1.001, lambda: a @ a, options=BenchOptions(
        warmup=1, min_repeats=3, max_repeats=5, target_rel_ci=0.5, rtol=1e-2))
    assert loose.check.ok is True
    unchecked = measure(lambda: a * float("nan"), lambda: a, options=BenchOptions(
        warmup=1, min_repeats=2, max_repeats=3, check=False))
    assert unchecked.check.ok is None and unchecked.check.note == "check disabled"
    # the same check on the real output of a bf16 GEMM: within bf16's tolerance, not fp32's
    out = (a.bfloat16() @ a.bfloat16())
    assert check_output(out, a @ a).ok is True
    assert check_output(out.float(), a @ a).ok is False


def test_run_workload_gemm_reports_flops_from_the_median():
    r = run_workload("gemm", {**TINY_GEMM, "dtype": "fp32"}, QUICK)
    assert r.workload == "gemm" and r.device == "cpu" and r.timer == "host"
    assert r.params["M"] == "24" and r.params["dtype"] == "fp32"
    assert r.check.ok is True and r.check.rel_err < 1e-6
    assert r.flop == 2 * 24 * 16 * 8
    assert r.flop_per_s == pytest.approx(r.flop / (r.stats.median * 1e-9))
    assert r.bytes == 4 * (24 * 8 + 8 * 16 + 24 * 16)
    assert r.stats.min <= r.stats.median <= r.stats.max


def test_flush_l2_runs_between_calls():
    r = run_workload("gemm", {**TINY_GEMM, "dtype": "fp32"},
                     BenchOptions(warmup=1, min_repeats=2, max_repeats=3, flush_l2=True))
    assert r.flush_l2 is True and r.stats.n >= 2 and r.check.ok is True


def test_sweep_table_json_and_csv(tmp_path):
    assert expand_sweep({"M": ["8", "16"], "dtype": ["fp32", "bf16"]}) == [
        {"M": "8", "dtype": "fp32"}, {"M": "8", "dtype": "bf16"},
        {"M": "16", "dtype": "fp32"}, {"M": "16", "dtype": "bf16"}]
    seen = []
    results = run_sweep("gemm", TINY_GEMM, {"M": ["8", "16"], "dtype": ["fp32", "bf16"]}, QUICK,
                        progress=lambda i, n, combo: seen.append((i, n, combo["dtype"])))
    assert seen == [(0, 4, "fp32"), (1, 4, "bf16"), (2, 4, "fp32"), (3, 4, "bf16")]
    assert [(r.params["M"], r.params["dtype"]) for r in results] == [
        ("8", "fp32"), ("8", "bf16"), ("16", "fp32"), ("16", "bf16")]
    assert all(r.check.ok for r in results)
    jp, cp = write_results(results, tmp_path / "out")
    doc = json.loads(jp.read_text())
    assert doc["schema"] == "kernelscope.bench/1" and len(doc["results"]) == 4
    first = doc["results"][0]
    assert first["stats_ns"]["n"] == len(first["samples_ns"]) == results[0].stats.n
    assert first["stats_ns"]["median"] == results[0].stats.median
    assert first["check"]["ok"] is True and first["timer"] == "host"
    rows = list(csv.DictReader(io.StringIO(cp.read_text())))
    assert [(r["param.M"], r["param.dtype"]) for r in rows] == [
        ("8", "fp32"), ("8", "bf16"), ("16", "fp32"), ("16", "bf16")]
    assert float(rows[3]["median_ns"]) == results[3].stats.median
    assert float(rows[3]["flop_per_s"]) == pytest.approx(2 * 16 * 16 * 8 / (results[3].stats.median * 1e-9))
    assert rows[1]["correct"] == "True" and float(rows[1]["tolerance"]) == 2e-2
    assert results_csv(results) == cp.read_text()
    assert results_json(results)["results"][2]["params"]["M"] == "16"
    table = format_table(results)
    assert table.splitlines()[1].split()[:2] == ["M", "dtype"] and "note: timing is host-side" in table


def test_unwritable_output_folder_is_one_sentence(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    r = run_workload("gemm", {**TINY_GEMM, "dtype": "fp32"}, QUICK)
    with pytest.raises(BenchError, match="choose a writable folder with --out") as exc:
        write_results([r], blocker / "out")  # fails even for root
    assert str(exc.value).startswith(f"Cannot write benchmark results to {blocker / 'out'}")


def test_cli_bench_sweep_json_and_files(tmp_path, capsys):
    rc = main(["bench", "gemm", "--param", "device=cpu", "--param", "M=16", "--param", "N=16",
               "--param", "K=16", "--sweep", "dtype=fp32,bf16", "--budget", "0.3", "--target-ci", "0.5",
               "--max-repeats", "10", "--out", str(tmp_path), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    doc = json.loads(out.out)
    assert [r["params"]["dtype"] for r in doc["results"]] == ["fp32", "bf16"]
    assert all(r["check"]["ok"] for r in doc["results"])
    assert (tmp_path / "bench.csv").read_text().count("\n") == 3
    assert "[2/2] dtype=bf16" in out.err


def test_cli_bench_errors_are_one_line(capsys):
    assert main(["bench", "nosuch"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kernelscope: There is no workload called 'nosuch'; known workloads: host_overhead")
    assert len(err.splitlines()) == 1
    assert main(["bench", "gemm", "--param", "Q=1"]) == 1
    assert "has no parameter 'Q'" in capsys.readouterr().err
    assert main(["bench", "gemm", "--sweep", "dtype=fp8"]) == 1
    assert "dtype=fp8 is not valid" in capsys.readouterr().err
    assert main(["bench", "gemm", "--sweep", "dtype"]) == 1
    assert "is not of the form name=value1,value2" in capsys.readouterr().err
    # no GPU here: the default device=cuda says so and how to run on CPU
    assert main(["bench", "gemm"]) == 1
    assert capsys.readouterr().err.strip() == (
        "kernelscope: No CUDA GPU is visible to PyTorch; run gemm on the CPU with --param device=cpu, or on "
        "a GPU machine.")


def test_cli_bench_list(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert "sdpa: torch scaled_dot_product_attention" in out and "    dtype=bf16: " in out


def test_cpu_threads_apply_while_measuring_only():
    before = torch.get_num_threads()
    seen = []
    measure(lambda: seen.append(torch.get_num_threads()), None,
            options=BenchOptions(warmup=1, min_repeats=2, max_repeats=2, cpu_threads=1))
    assert seen == [1, 1, 1] and torch.get_num_threads() == before  # 1 warm-up + 2 timed calls


class _FakeGpu:
    """Stands in for the GPU (the one thing this machine cannot have): a GPU clock that each
    call of the workload advances by 0.25 ms, CUDA events that read it, and NVTX that records."""

    def __init__(self):
        self.clock_ms = 0.0
        self.syncs = 0
        self.nvtx = []
        gpu = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.t = None

            def record(self, stream=None):
                self.t = gpu.clock_ms

            def synchronize(self):
                gpu.syncs += 1

            def elapsed_time(self, end):
                return end.t - self.t

        self.Event = Event

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "Event", self.Event)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
        monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda msg: self.nvtx.append(("push", msg)))
        monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: self.nvtx.append(("pop",)))

    def kernel(self):
        self.clock_ms += 0.25
        return torch.ones(4)


def test_cuda_event_timing_path(monkeypatch):
    gpu = _FakeGpu()
    gpu.install(monkeypatch)
    r = measure(gpu.kernel, lambda: torch.ones(4), device="cuda", name="k",
                options=BenchOptions(warmup=2, min_repeats=4, max_repeats=50, target_rel_ci=0.01))
    assert r.timer == "cuda-events" and r.device_name == "NVIDIA H200"
    assert r.timer_note == "GPU time between CUDA events recorded around each call"
    assert r.samples_ns == [250_000.0] * 4 and r.stop_reason == "ci-target"  # zero spread: stops at min
    assert r.stats.median == 250_000.0 and r.stats.ci95_half_width == 0.0
    assert r.check.ok is True and gpu.syncs == 4  # one event wait per timed call
    assert gpu.nvtx == [("push", "bench:k:warmup"), ("pop",), ("push", "bench:k"), ("pop",)]
    host = measure(gpu.kernel, None, device="cuda", host_timer=True,
                   options=BenchOptions(warmup=1, min_repeats=2, max_repeats=3))
    assert host.timer == "host" and host.timer_note == HOST_TIMER_NOTE
