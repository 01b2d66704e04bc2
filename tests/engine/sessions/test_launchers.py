"""Per-rank profiling: the exact argv around torchrun, srun and mpirun; the rank wrapper run for real."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.sessions import launchers as L
from engine.sessions.argv import per_rank_session_argv
from engine.sessions.spec import NcuOptions, SessionSpec, SpecError

NSYS = ["nsys", "profile", "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none"]


def _spec(*cmd: str, **kw: object) -> SessionSpec:
    return SessionSpec(tool=str(kw.pop("tool", "nsys")), command=tuple(cmd), per_rank=True, **kw)  # type: ignore[arg-type]


def test_torchrun_script_gets_no_python_and_the_rank_in_the_name() -> None:
    spec = _spec("torchrun", "--nproc-per-node", "2", "--standalone", "train.py", "--lr", "0.1")
    argv = per_rank_session_argv(spec, "nsys", "/s/train", list(spec.command), env={"PATH": ""})
    assert argv == ["torchrun", "--nproc-per-node", "2", "--standalone", "--no-python", *NSYS,
                    "--output", "/s/train_rank%q{RANK}", "--force-overwrite", "true",
                    sys.executable, "-u", "train.py", "--lr", "0.1"]


def test_torchrun_module_and_python_m_form() -> None:
    spec = _spec("/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=1", "-m", "pkg.train", "x")
    argv = per_rank_session_argv(spec, "nsys", "/s/t", list(spec.command))
    assert argv[:4] == ["/usr/bin/python3", "-m", "torch.distributed.run", "--nnodes=1"]
    assert argv[4] == "--no-python"
    assert argv[-5:] == ["/usr/bin/python3", "-u", "-m", "pkg.train", "x"]


def test_torchrun_interpreter_comes_from_its_shebang(tmp_path: Path) -> None:
    tr = tmp_path / "torchrun"
    tr.write_text("#!/opt/py/bin/python3.11\nimport sys\n")
    tr.chmod(0o755)
    line = L.split([str(tr), "--nproc_per_node=4", "t.py"])
    assert line.python == "/opt/py/bin/python3.11" and line.program == ("t.py",)


def test_srun_uses_slurm_procid_and_ncu_export() -> None:
    spec = _spec("srun", "-N", "2", "--ntasks-per-node=4", "-l", "./app", "10", tool="ncu",
                 ncu=NcuOptions(set=None))
    argv = per_rank_session_argv(spec, "ncu", "/s/app", list(spec.command))
    assert argv == ["srun", "-N", "2", "--ntasks-per-node=4", "-l", "ncu", "--clock-control", "none",
                    "--export", "/s/app_rank%q{SLURM_PROCID}", "--force-overwrite", "./app", "10"]


def test_mpirun_and_profile_ranks_use_the_wrapper() -> None:
    spec = _spec("mpirun", "-np", "4", "--mca", "btl", "self,tcp", "--oversubscribe", "./app",
                 profile_ranks="0,3")
    argv = per_rank_session_argv(spec, "nsys", "/s/app", list(spec.command))
    head = ["mpirun", "-np", "4", "--mca", "btl", "self,tcp", "--oversubscribe"]
    assert argv[:len(head)] == head
    rest = argv[len(head):]
    assert rest[:3] == ["sh", "-c", L.RANK_WRAPPER]
    assert rest[3:6] == ["kernelscope-rank", "OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK", "0,3"]
    n = int(rest[6])
    assert rest[7:7 + n][-3:] == ["/s/app_rank%q{KERNELSCOPE_RANK}", "--force-overwrite", "true"]
    assert rest[7 + n:] == ["./app"]


@pytest.mark.parametrize(("env", "profiled"), [
    ({"PMI_RANK": "3"}, True), ({"OMPI_COMM_WORLD_RANK": "1"}, False), ({"PMIX_RANK": "0"}, True),
])
def test_wrapper_runs_the_profiler_only_on_chosen_ranks(env: dict[str, str], profiled: bool) -> None:
    profiler = [sys.executable, "-c", "import os,sys; print('PROFILED', os.environ['KERNELSCOPE_RANK'], "
                "sys.argv[1:])"]
    program = ["echo", "plain"]
    argv = ["sh", "-c", L.RANK_WRAPPER, "kernelscope-rank", "OMPI_COMM_WORLD_RANK PMI_RANK PMIX_RANK", "0,3",
            str(len(profiler)), *profiler, *program]
    out = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                         check=True).stdout
    rank = next(iter(env.values()))
    assert out.strip() == (f"PROFILED {rank} ['echo', 'plain']" if profiled else "plain")


def test_parse_ranks_and_bad_input() -> None:
    assert L.parse_ranks("0,3") == (0, 3)
    assert L.parse_ranks(" 0-2, 5 ,2") == (0, 1, 2, 5)
    assert L.parse_ranks("") == ()
    for bad in ("a", "3-1", "-1", "1,,2"):
        with pytest.raises(L.LauncherError):
            L.parse_ranks(bad)


def test_spec_refuses_what_cannot_be_done_per_rank() -> None:
    with pytest.raises(SpecError, match="torchrun, srun, mpirun"):
        SessionSpec(tool="nsys", command=("./app",), per_rank=True).validate()
    with pytest.raises(SpecError, match="nsys or ncu"):
        SessionSpec(tool="bench", command=("torchrun", "t.py"), per_rank=True).validate()
    with pytest.raises(SpecError, match="not a list of ranks"):
        SessionSpec(tool="nsys", command=("torchrun", "t.py"), profile_ranks="x").validate()
    with pytest.raises(SpecError, match="No program"):
        SessionSpec(tool="nsys", command=("srun", "-N", "2"), per_rank=True).validate()
    spec = SessionSpec(tool="nsys", command=("torchrun", "t.py"), profile_ranks="1")
    assert SessionSpec.from_dict(spec.to_dict()) == spec.validate()


def test_rank_reports_are_found_in_rank_order(tmp_path: Path) -> None:
    for n in (10, 2, 0):
        (tmp_path / f"job_rank{n}.nsys-rep").write_bytes(b"x")
    (tmp_path / "job_rank3.nsys-rep").write_bytes(b"")  # empty: not a report
    (tmp_path / "other_rank1.nsys-rep").write_bytes(b"x")
    assert [p.name for p in L.rank_reports(tmp_path, "job", ".nsys-rep")] == \
        ["job_rank0.nsys-rep", "job_rank2.nsys-rep", "job_rank10.nsys-rep"]
