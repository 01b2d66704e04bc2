"""The PyTorch views on real recordings (H200, torch 2.11; tests/data/recordings/torch/README.md).

Checked against what does not come from our code: the raw trace events, ``torch.profiler``'s own
``key_averages()`` for the same run, ``torch.cuda.max_memory_allocated()`` printed by the program,
and the GPU step times measured with CUDA events when each finding's fix was applied alone.
"""

from __future__ import annotations

import json
import lzma
import pickle
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from engine.reports import open_report
from engine.system.errors import ReportError
from tests.conftest import FIXTURES, REPO

REC = REPO / "tests" / "data" / "recordings" / "torch"
KINETO = ("torch_train", "torch_train_fixed", "torch_conv")  # torch_conv: held out of the tuning


@pytest.fixture(scope="module")
def rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recordings, decompressed once."""
    out = tmp_path_factory.mktemp("torchrec")
    for xz in REC.glob("*.xz"):
        (out / xz.name[:-3]).write_bytes(lzma.decompress(xz.read_bytes()))
    for f in REC.glob("*.json"):
        (out / f.name).write_bytes(f.read_bytes())
    return out


def _truth(name: str) -> dict:
    return json.loads((REC / f"{name}_truth.json").read_text())


def _events(path: Path):
    from engine.analysis.pytorch.events import torch_events

    return torch_events(open_report(path))


@pytest.mark.parametrize("name", [*KINETO, "fixture_sdpa"])
def test_operator_gpu_time_is_the_sum_of_its_kernels_in_the_raw_events(rec: Path, name: str) -> None:
    from engine.analysis.pytorch.operators import operator_table

    path = FIXTURES / "torch" / "torch_sdpa_trace.json" if name == "fixture_sdpa" else rec / f"{name}.json"
    raw = json.loads(path.read_text())["traceEvents"]
    op_name = {e["args"]["External id"]: e["name"] for e in raw
               if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    want: dict[str, float] = defaultdict(float)
    count = 0
    for e in raw:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            want[op_name[e["args"]["External id"]]] += e["dur"] * 1000.0
            count += 1
    table = operator_table(_events(path))
    got = {r.name: r.gpu_self_ns for r in table.rows if r.kind == "operator"}
    assert set(k for k, v in want.items() if v) == set(k for k, v in got.items() if v)
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=count)  # each event rounded to 1 ns once
    assert table.linked_gpu_ns == table.gpu_ns == pytest.approx(sum(want.values()), abs=count)


@pytest.mark.parametrize("name", KINETO)
def test_top_operators_agree_with_key_averages(rec: Path, name: str) -> None:
    from engine.analysis.pytorch.operators import operator_table

    ka = {r["key"]: r for r in json.loads((REC / f"{name}_key_averages.json").read_text())
          if not r["by_shapes"]}
    ev = _events(rec / f"{name}.json")
    table = operator_table(ev)
    ours = [r for r in table.rows if r.name.startswith("aten::")][:15]
    theirs = sorted((r for r in ka.values() if r["key"].startswith("aten::")),
                    key=lambda r: -r["self_device_time_total_us"])[:15]
    assert {r.name for r in ours} == {r["key"] for r in theirs}
    nested = {ev.label(i) for i in range(ev.n) if ev.op_parent[i] >= 0 and not ev.merged[i]
              and ev.label(i) == ev.label(int(ev.op_parent[i]))}
    for r in ours:
        k = ka[r.name]
        assert r.calls == k["count"], r.name
        assert r.host_total_ns / 1e3 == pytest.approx(k["cpu_time_total_us"], rel=0.05), r.name
        assert r.host_self_ns / 1e3 == pytest.approx(k["self_cpu_time_total_us"], rel=0.05, abs=1), r.name
        assert r.gpu_self_ns / 1e3 == pytest.approx(k["self_device_time_total_us"], rel=0.05), r.name
        if r.name not in nested:  # key_averages counts an op nested in itself twice; we count it once
            assert r.gpu_total_ns / 1e3 == pytest.approx(k["device_time_total_us"], rel=0.05), r.name


@pytest.mark.parametrize("name", KINETO)
def test_memory_peak_is_max_memory_allocated(rec: Path, name: str) -> None:
    from engine.analysis.pytorch.memory import memory_timeline

    tl = memory_timeline(open_report(rec / f"{name}.json"))
    truth = _truth(name)
    assert [c.device for c in tl.curves] == [0]
    assert tl.curves[0].peak_allocated == truth["max_memory_allocated"]
    assert tl.curves[0].peak_reserved == truth["max_memory_reserved"]


def test_snapshot_peak_alive_and_stream_reader(rec: Path) -> None:
    from engine.analysis.pytorch.memory import alive_at_peak, memory_timeline
    from engine.reports.torch_snapshot import _convert

    path = rec / "torch_train_snapshot.pickle"
    trace = open_report(path)
    assert trace.info.kind == "snapshot"
    c = memory_timeline(trace).curves[0]
    assert c.peak_allocated == _truth("torch_train_snapshot")["max_memory_allocated"]
    alive = alive_at_peak(trace.columns_, c)
    assert sum(a["bytes"] for a in alive) == c.peak_allocated
    assert "torch_workbench.py" in alive[0]["where"]
    # the stream reader gives what a full pickle.load gives
    ref = _convert(pickle.loads(path.read_bytes()))
    cols = trace.columns_
    for col in ("device", "action", "addr", "size", "stream", "time_us"):
        assert np.array_equal(np.asarray(getattr(cols, col)), getattr(ref, col)), col
    assert [cols.stacks[s] for s in cols.stack] == [ref.stacks[s] for s in ref.stack]


def test_snapshot_other_protocols_devices_and_bad_files(rec: Path, tmp_path: Path) -> None:
    from engine.analysis.pytorch.memory import memory_timeline

    doc = pickle.loads((rec / "torch_train_snapshot.pickle").read_bytes())
    events = doc["device_traces"][0]
    doc["device_traces"] = [events[:100], [], events[100:300]]
    for proto in (2, 4, 5):
        p = tmp_path / f"p{proto}.pickle"
        p.write_bytes(pickle.dumps(doc, protocol=proto))
        tl = memory_timeline(open_report(p))
        assert {c.device: len(c.time_ns) for c in tl.curves if len(c.time_ns)} == {0: 100, 2: 200}
    cut = tmp_path / "cut.pickle"
    cut.write_bytes((rec / "torch_train_snapshot.pickle").read_bytes()[:500_000])
    with pytest.raises(ReportError, match="truncated"):
        open_report(cut)

    class Evil:
        def __reduce__(self):
            return (print, ("ran",))

    evil = tmp_path / "evil.pickle"
    evil.write_bytes(pickle.dumps({"segments": [], "device_traces": [[Evil()]]}))
    with pytest.raises(ReportError, match="not a PyTorch memory snapshot"):
        open_report(evil)


def test_module_tree_sums_to_the_steps(rec: Path) -> None:
    from engine.analysis.pytorch.modules import module_tree

    ev = _events(rec / "torch_train.json")
    tree = module_tree(ev)
    root = tree.root
    assert tree.steps == 7 and tree.modules_from == "nn.Module events"
    assert list(root.children) == ["forward", "backward", "optimizer", "other"]
    assert sum(c.gpu_ns for c in root.children.values()) == root.gpu_ns
    assert sum(c.host_ns for c in root.children.values()) == root.host_ns
    steps = np.flatnonzero(ev.cat == 4)
    assert root.host_ns == int((ev.end[steps] - ev.start[steps]).sum())
    model = root.children["forward"].children["TinyGPT_0"]
    assert sorted(model.children) == ["Block_0", "Block_1", "Block_2", "Block_3", "Embedding_0",
                                      "LayerNorm_8", "Linear_16"]
    assert sum(c.gpu_ns for c in model.children.values()) <= model.gpu_ns
    back = root.children["backward"].children["TinyGPT_0"]
    assert back.gpu_ns > model.gpu_ns  # the backward pass does about twice the forward's math


def test_nsys_report_with_pytorch_nvtx(rec: Path) -> None:
    from engine.analysis.pytorch.memory import memory_timeline
    from engine.analysis.pytorch.operators import operator_table

    trace = open_report(rec / "torch_train_nsys_base.sqlite")
    ev = _events(rec / "torch_train_nsys_base.sqlite")
    table = operator_table(ev, "shapes")
    addmm = [r for r in table.rows if r.name == "aten::addmm"]
    assert addmm and all("input_op_ids" not in r.shapes and r.shapes.startswith("[[") for r in addmm)
    assert table.linked_gpu_ns == table.gpu_ns
    assert sum(r.gpu_self_ns for r in table.rows) == table.gpu_ns
    tl = memory_timeline(trace)
    # driver-level memory: at least what torch reserved (plus cuBLAS workspaces)
    assert tl.curves[0].allocated is None
    assert _truth("torch_train_nsys_base")["max_memory_reserved"] <= tl.curves[0].peak_reserved
    assert tl.curves[0].peak_reserved < 1.05 * _truth("torch_train_nsys_base")["max_memory_reserved"]


def test_tensor_cores_from_kernel_names(rec: Path) -> None:
    from engine.analysis.pytorch.kernels import kernel_table

    base = kernel_table(_events(rec / "torch_train.json"))
    fixed = kernel_table(_events(rec / "torch_train_fixed.json"))
    conv = kernel_table(_events(rec / "torch_conv.json"))
    assert base.tensor_share < 0.02 and base.cuda_core_math_ns > 0.7 * base.kernel_ns
    assert fixed.tensor_share > 0.3 and fixed.cuda_core_math_ns < 0.01 * fixed.kernel_ns
    assert conv.cuda_core_math_ns > 0.5 * conv.kernel_ns  # fp32 cuDNN convolutions (held out)


def _measured_saving_ms(fix: str) -> float:
    runs: dict[str, list[float]] = defaultdict(list)
    for line in (REC / "fixes.jsonl").read_text().splitlines():
        r = json.loads(line)
        runs[r["tag"].rsplit("_", 1)[0]].append(r["gpu_step_ms_median"])
    return float(np.median(runs["fix_none"]) - np.median(runs[f"fix_{fix}"]))


def test_findings_name_the_cause_their_fix_removes(rec: Path) -> None:
    """Each finding's per-step gain, against the GPU step measured with only its fix applied."""
    from engine.analysis.findings import findings_for

    found = {f.id: f for f in findings_for(rec / "torch_train.json")}
    tc = found["torch.cuda-core-math"]
    assert tc.severity == "critical"
    measured = _measured_saving_ms("tc")  # bf16 autocast alone: 43.7 -> 12.2 ms on the H200
    assert 25 < measured < 35
    assert 0.5 * measured < tc.gain.per_step_ns / 1e6 <= measured  # an estimate on the safe side
    fuse = found["torch.unfused-elementwise"]
    assert 0 < fuse.gain.per_step_ns / 1e6 <= _measured_saving_ms("gelu")  # F.gelu alone: -4.7 ms
    item = found["torch.item-sync"]
    assert item.evidence[0].value == 7  # one loss.item() per step, not the optimizer's CPU .item()s
    fixed = {f.id for f in findings_for(rec / "torch_train_fixed.json")}
    assert not fixed & {"torch.cuda-core-math", "torch.unfused-elementwise", "torch.item-sync"}


def test_cli_ops_modules_memory(rec: Path) -> None:
    def run(*args: str) -> str:
        out = subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True,
                             check=True, cwd=REPO)
        return out.stdout

    doc = json.loads(run("ops", str(rec / "torch_train.json"), "--json"))
    assert doc["schema"] == "kernelscope.ops/1" and doc["operators"][0]["name"] == "aten::mm"
    assert sum(r["gpu_self_ns"] for r in doc["operators"]) == doc["linked_gpu_ns"]
    text = run("ops", str(rec / "torch_train.json"), "--by", "shapes", "--limit", "5", "--kernels")
    assert "aten::mm [[8192,8192],[8192,768]]" in text and "no (CUDA cores)" in text
    mods = json.loads(run("modules", str(rec / "torch_train.json"), "--json"))
    assert mods["schema"] == "kernelscope.modules/1" and mods["steps"] == 7
    mem = run("memory", str(rec / "torch_train_snapshot.pickle"))
    assert f"({_truth('torch_train_snapshot')['max_memory_allocated']:,} bytes)" in mem
    assert "Alive at the peak" in mem


def test_export_has_the_pytorch_section(rec: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    subprocess.run([sys.executable, "-m", "engine.cli", "export", str(rec / "torch_train.json"),
                    "--format", "md", "-o", str(out)], check=True, capture_output=True, cwd=REPO)
    text = out.read_text()
    section = text[text.index("## PyTorch"):text.index("## Findings")]
    assert "| `aten::mm` | 238 | 7.723 | 131.500 | 131.500 |" in section
    assert f"({_truth('torch_train')['max_memory_allocated']:,} bytes)" in section
    assert "Matrix math runs on CUDA cores" in text


def test_modules_from_record_function_ranges_leave_out_library_ranges(tmp_path: Path) -> None:
    """A DDP Kineto trace recorded before this view existed (no with_modules): its record_function
    ranges stand for modules, but PyTorch's own ('nccl:all_reduce') do not."""
    from engine.analysis.pytorch.modules import module_tree

    src = REPO / "tests/data/recordings/nsys/ddp/ddp_kineto_rank0_kineto.json.xz"
    path = tmp_path / "ddp.json"
    path.write_bytes(lzma.decompress(src.read_bytes()))
    tree = module_tree(_events(path))
    assert tree.modules_from == "record_function ranges"
    assert list(tree.root.children["forward"].children) == ["DistributedDataParallel.forward"]
    assert sum(c.gpu_ns for c in tree.root.children.values()) == tree.root.gpu_ns
