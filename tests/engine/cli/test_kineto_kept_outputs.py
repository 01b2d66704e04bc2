"""A Kineto trace asked twice on the command line: the second ops/modules/memory prints the kept text."""

from __future__ import annotations

import lzma
import os
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
