"""Run view ▸ "One report per rank": a real 2-process torchrun job (gloo, CPU) under the stand-in nsys; both
ranks' reports open in the window and the Ranks view shows them as one job."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.engine import fake_tools
from tests.gui.conftest import LOAD_TIMEOUT_MS

TORCHRUN = Path(sys.executable).parent / "torchrun"
JOB = Path(__file__).resolve().parents[2] / "engine" / "sessions" / "ddp_gloo_job.py"
pytestmark = pytest.mark.skipif(not TORCHRUN.exists(), reason="torchrun (PyTorch) is not installed")


def test_form_values_reach_the_spec(tmp_path: Path) -> None:
    from gui.views.run_form import FormValues, reports_to_open, spec_from_form

    v = FormValues(what="command", command=f"torchrun --nproc-per-node 2 {JOB}", tool="nsys",
                   out_dir=str(tmp_path), per_rank=True, profile_ranks=" 1 ")
    spec = spec_from_form(v)
    assert (spec.per_rank, spec.profile_ranks) == (True, "1")
    assert spec_from_form(FormValues(what="command", command="torchrun t.py", tool="nsys",
                                     out_dir=str(tmp_path))).per_rank is False
    from engine.system.errors import KernelscopeError

    with pytest.raises(KernelscopeError, match="One report per rank .* torchrun, srun, mpirun or mpiexec"):
        spec_from_form(FormValues(what="command", command="./app", tool="nsys", out_dir=str(tmp_path),
                                  per_rank=True))
    reps = [Path(f"/s/j_rank{n}.{e}") for n in (10, 2) for e in ("nsys-rep", "sqlite")]
    assert reports_to_open(reps) == [Path("/s/j_rank2.sqlite"), Path("/s/j_rank10.sqlite")]
    assert reports_to_open([Path("/s/j.nsys-rep"), Path("/s/j.sqlite")]) == [Path("/s/j.sqlite")]


def test_per_rank_job_opens_every_rank_and_the_ranks_view_lines_them_up(
        qtbot, window, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_DATA", str(tmp_path / "data"))
    fake = fake_tools.install(tmp_path / "root")
    for k, val in fake_tools.env_for(fake).items():
        monkeypatch.setenv(k, val)
    window.set_view("run")
    view = window.views["run"]
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=10_000)
    view.form.out_edit.setText(str(tmp_path / "out"))
    view.set_command([str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(JOB)])
    view.set_tool("nsys")
    assert not view.form.profile_ranks_edit.isEnabled()
    view.form.per_rank_check.setChecked(True)
    assert view.form.profile_ranks_edit.isEnabled()
    with qtbot.waitSignal(view.sig_session_finished, timeout=120_000) as done:
        assert view.start()
    outcome = done.args[0]
    assert outcome.ok, outcome.message
    qtbot.waitUntil(lambda: len(window.reports) == 2 and not window.is_loading(), timeout=LOAD_TIMEOUT_MS)
    assert sorted(r.name for r in window.reports.reports) == \
        sorted(p.name for p in outcome.reports if p.suffix == ".sqlite")
    assert [p.name for p in outcome.reports if p.suffix == ".sqlite"] == ["torchrun_rank0.sqlite",
                                                                          "torchrun_rank1.sqlite"]
    assert "rank 1 of 2" in view.log.toPlainText()
    window.set_view("ranks")
    ranks = window.views["ranks"]
    qtbot.waitUntil(lambda: ranks.result is not None and not ranks.is_busy(), timeout=LOAD_TIMEOUT_MS)
    assert [r.rank for r in ranks.result.ranks] == [0, 1]
    assert "2 open reports look like the ranks of one job" in ranks.offer.text()
