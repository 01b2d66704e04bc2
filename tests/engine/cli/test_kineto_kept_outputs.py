"""A Kineto trace asked twice on the command line: the second ops/modules/memory prints the kept text."""

from __future__ import annotations

import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_ops_modules_memory_are_kept_and_printed_again(tmp_path: Path) -> None:
    trace = tmp_path / "torch_train.json"
    src = REPO / "tests/data/recordings/torch/torch_train.json.xz"
    trace.write_bytes(lzma.decompress(src.read_bytes()))
    cache = Path(os.environ["KERNELSCOPE_CACHE"])

    def run(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "engine.cli", *args, str(trace)], capture_output=True,
                              text=True, check=True, cwd=REPO).stdout

    for args in (("ops", "--json"), ("ops", "--by", "shapes", "--kernels"), ("modules",), ("memory",)):
        first = run(*args)
        kept = list(cache.glob(f"results/*/cli-{args[0]}-*"))
        assert kept and first == run(*args)
        if args[0] == "ops" and "--json" not in args:
            assert "aten::mm [[8192,8192],[8192,768]]" in first
    # the columns of the trace are in the column cache: a second open maps them
    assert list(cache.glob("columns/*/tables.json"))
    # another option is another entry, not the kept text of the first
    assert run("ops", "--limit", "3") != run("ops", "--limit", "4")


def test_the_first_question_keeps_what_every_later_one_asks(tmp_path: Path) -> None:
    """`summary` first: a later `ops`, `modules` or `memory` loads a kept table (the events are not built)."""
    trace = tmp_path / "torch_train.json"
    src = REPO / "tests/data/recordings/torch/torch_train.json.xz"
    trace.write_bytes(lzma.decompress(src.read_bytes()))

    def run(cache: Path, *args: str) -> str:
        env = dict(os.environ, KERNELSCOPE_CACHE=str(cache))
        return subprocess.run([sys.executable, "-m", "engine.cli", *args, str(trace)], capture_output=True,
                              text=True, check=True, cwd=REPO, env=env).stdout

    alone = tmp_path / "alone"  # each command on its own fresh cache: what it prints computing its table
    expected = {}
    for args in (("ops",), ("ops", "--by", "shapes", "--kernels"), ("modules",), ("memory",)):
        shutil.rmtree(alone, ignore_errors=True)
        expected[args] = run(alone, *args)
    cache = tmp_path / "cache"
    summary = run(cache, "summary")
    assert "GPU" in summary
    (entry,) = cache.glob("results/*")
    kept = {f.name for f in entry.iterdir()}
    for name in ("overview-v1-auto.pickle", "pytorch-v1-ops-name.pickle", "pytorch-v1-ops-shapes.pickle",
                 "pytorch-v1-kernels.pickle", "pytorch-v1-modules.pickle", "pytorch-v1-memory.pickle"):
        assert name in kept, name
    for f in entry.glob("pytorch-v1-events.*"):  # a command that built its table would need them again
        f.unlink()
    for args, text in expected.items():
        assert run(cache, *args) == text, args
    assert not list(entry.glob("pytorch-v1-events.*"))
    # a window keeps the overview, and the tables only once its PyTorch view is shown: the first `ops`
    # then keeps them all
    for f in entry.glob("pytorch-v1-*"):
        f.unlink()
    for f in entry.glob("cli-*"):
        f.unlink()
    assert run(cache, "modules") == expected[("modules",)]
    assert (entry / "pytorch-v1-ops-shapes.pickle").exists() and (entry / "pytorch-v1-memory.pickle").exists()
    # the first question being `modules` keeps the overview too
    shutil.rmtree(cache)
    run(cache, "modules")
    (entry,) = cache.glob("results/*")
    assert (entry / "overview-v1-auto.pickle").exists()
    assert run(cache, "summary") == summary
