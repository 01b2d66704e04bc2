"""``kernelscope ranks`` never states what cannot be true, on every real multi-rank recording we have.

For the 2-GPU DDP recordings (per-rank, torchrun, Kineto) and the 2- and 4-rank zoo jobs: a rank's wait
is within its NCCL time and its step (in every step and per step on average); the parts of a step add
up to it; the text table, the straggler line and its evidence quote the JSON's numbers (one value per
quantity); the job's step the evidence names is the named rank's row; the labels say mean or median as
the numbers are.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from engine.analysis.ranks.straggler import duration_text
from engine.analysis.ranks.text import COLUMNS, LEGEND, ms_cell
from engine.cli.app import main
from tests.engine.analysis import ddp_recordings as D
from tests.invariants import check_ranks, check_text

ZOO = Path(__file__).resolve().parents[2] / "data" / "recordings" / "zoo"
#: job -> (where, names, the straggler the recording injected: a rank, -1 for none, None for "moves")
JOBS: dict[str, tuple[str, tuple[str, ...], int | None]] = {
    "ddp_per_rank": ("ddp", D.PER_RANK, 1),
    "ddp_torchrun": ("ddp", D.TORCHRUN, 1),
    "ddp_kineto": ("ddp", D.KINETO, 1),
    **{f"ddp4_{k}": ("ddp4", tuple(f"ddp4_{k}_rank{r}.sqlite" for r in range(4)), s)
       for k, s in (("base", -1), ("gemm", 3), ("moving", None))},
    **{f"ddp2_{k}": ("tuned", (f"ddp2_{k}_rank0.sqlite", f"ddp2_{k}_rank1.sqlite"), s)
       for k, s in (("gemm", 1), ("nonvtx", 0), ("moving", None), ("sleep", -1), ("outer_ahead", -1))},
}


def _unpack(folder: Path, where: str, names: tuple[str, ...]) -> list[Path]:
    if where == "ddp":
        return D.unpack(folder / "ddp", names)
    import lzma
    import shutil

    out = []
    for n in names:
        src = ZOO / where / f"{n}.xz"
        if not src.is_file():
            pytest.skip(f"{src} is not in tests/data")
        dest = folder / where / n
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            with lzma.open(src) as fin, (dest.parent / (n + ".part")).open("wb") as fout:
                shutil.copyfileobj(fin, fout)
            (dest.parent / (n + ".part")).rename(dest)
        out.append(dest)
    return out


def _cli(args: list[str]) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["ranks", *args]) == 0
    return buf.getvalue()


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not D.available():
        pytest.skip("the 2-GPU DDP recordings are not in tests/data")
    return tmp_path_factory.mktemp("ranks_invariants")


@pytest.fixture(scope="module")
def outputs(recordings: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """Per job: the --json document and the text page (each computed once)."""
    out = {}
    for job, (where, names, _) in JOBS.items():
        paths = [str(p) for p in _unpack(recordings, where, names)]
        out[job] = (json.loads(_cli([*paths, "--json"])), _cli(paths))
    return out


def _headings(text: str) -> list[str]:
    """The table's headings (``step ms`` is one: headings are apart by two spaces or more)."""
    return re.split(r"\s{2,}", text.splitlines()[0].strip())


def _table(text: str) -> dict[int, dict[str, str]]:
    """The text page's rank table: rank -> heading -> cell (cells hold no spaces)."""
    head = _headings(text)
    rows = {}
    for line in text.splitlines()[1:]:
        if not line or line.startswith("("):
            break
        cells = dict(zip(head, line.split(), strict=True))
        rows[int(cells["rank"])] = cells
    return rows


@pytest.mark.parametrize("job", list(JOBS))
def test_wait_is_within_the_step_and_the_parts_add_up(outputs: dict[str, Any], job: str) -> None:
    doc, _text = outputs[job]
    assert check_ranks(doc) == []
    for r in doc["ranks"]:
        m = r["mean_per_step"]
        assert m["step_ns"] == r["step_ns"] and m["wait_ns"] == r["wait_ns"]
        assert 0 <= m["exposed_wait_ns"] <= m["wait_ns"] <= m["nccl_ns"] <= r["step_ns"], (r["rank"], m)
        assert m["host_ns"] <= m["idle_ns"] + 1
        assert abs(m["compute_ns"] + m["nccl_ns"] + m["idle_ns"] - r["step_ns"]) <= 2  # rounding of 4 means
        steady = [c for c in r["per_step"] if not c["warmup"]] or r["per_step"]
        assert len(steady) == r["steady_steps"]
        assert r["nccl_wait_ns"] == sum(c["nccl_wait_ns"] for c in steady)
        for c in r["per_step"]:  # in every step, not only on average
            assert 0 <= c["exposed_wait_ns"] <= c["nccl_wait_ns"] <= c["nccl_ns"] <= c["duration_ns"], c
            assert c["compute_ns"] + c["nccl_ns"] + c["idle_ns"] == c["duration_ns"]
    s = doc["straggler"]
    if s is not None:
        own = next(r for r in doc["ranks"] if r["rank"] == s["rank"])
        assert 0 < s["cost_per_step_ns"] <= own["step_ns"] and s["cost_per_step_ns"] <= own["step_median_ns"]


@pytest.mark.parametrize("job", list(JOBS))
def test_text_quotes_the_json(outputs: dict[str, Any], job: str) -> None:
    doc, text = outputs[job]
    assert check_text(text) == []
    assert _headings(text)[5:] == [h for h, _ in COLUMNS]
    assert f"({LEGEND};" in text  # "mean" and "median" said of the columns they head
    table = _table(text)
    assert sorted(table) == [r["rank"] for r in doc["ranks"]]  # rank order
    for r in doc["ranks"]:
        row = table[r["rank"]]
        for head, key in COLUMNS:
            want = r["step_median_ns"] if key == "median" else r["mean_per_step"][key]
            assert row[head] == ms_cell(want), (r["rank"], head)


@pytest.mark.parametrize("job", list(JOBS))
def test_the_job_step_and_the_straggler_line_are_the_rows(outputs: dict[str, Any], job: str) -> None:
    doc, text = outputs[job]
    injected = JOBS[job][2]
    s = doc["straggler"]
    pace = doc["job_step"]
    table = _table(text)
    if injected == -1:
        assert s is None and "Straggler: none." in text
    elif injected is not None:
        assert s is not None and s["rank"] == injected
    if s is not None:
        assert pace["rank"] == s["rank"]
    own = next(r for r in doc["ranks"] if r["rank"] == pace["rank"])
    assert pace["step_ns"] == own["step_ns"] and pace["step_median_ns"] == own["step_median_ns"]
    # the sentence that names the job's step quotes that rank's row: its step and its median
    median = duration_text(own["step_median_ns"])
    sentence = (f"rank {pace['rank']}'s step, {duration_text(own['step_ns'])} (mean over its "
                f"{own['steady_steps']} steady steps, as in its row; median {median})")
    assert sentence in text
    assert table[pace["rank"]]["step ms"] == ms_cell(own["step_ns"])
    if s is None:
        return
    line = next(ln for ln in text.splitlines() if ln.startswith("Straggler:"))
    assert f"{duration_text(s['cost_per_step_ns'])} shorter without its extra time (what-if, median" in line
    waits = s["others_exposed_wait_per_step_ns"]
    assert sorted(int(k) for k in waits) == [r["rank"] for r in doc["ranks"] if r["rank"] != s["rank"]]
    evidence = " ".join(s["evidence"])
    for rank, ns in waits.items():
        row = next(r for r in doc["ranks"] if r["rank"] == int(rank))
        assert ns == row["mean_per_step"]["exposed_wait_ns"]  # the others' wait is their row's
        assert f"rank {rank}: {duration_text(ns)}" in evidence
        if "moves between steps" not in line:
            assert f"rank {rank}: {duration_text(ns)}" in line
    assert f"the others wait {duration_text(s['slow_wait_ns'])} per step with nothing else to run (median" \
        in evidence
