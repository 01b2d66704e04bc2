"""Session specs (validation, JSON/TOML round trip) and the exact argv of every launch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine.sessions import argv as A
from engine.sessions.spec import NcuOptions, NsysOptions, SessionSpec, SpecError, TargetSpec
from engine.system.errors import KernelscopeError


def test_nsys_argv_defaults_and_full() -> None:
    assert A.nsys_profile_argv("/n/nsys", NsysOptions(), "/o/app", ["./app", "5"]) == [
        "/n/nsys", "profile", "--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none",
        "--output", "/o/app", "--force-overwrite", "true", "./app", "5",
    ]
    opts = NsysOptions(trace=("cuda", "nvtx", "cublas"), sample="process-tree", cpuctxsw="process-tree",
                       cuda_memory_usage=True, gpu_metrics_devices="0", gpu_metrics_frequency_hz=10000,
                       extra=("--capture-range=cudaProfilerApi",))
    assert A.nsys_profile_argv("nsys", opts, "r", ["python3", "-m", "x"]) == [
        "nsys", "profile", "--trace=cuda,nvtx,cublas", "--sample=process-tree", "--cpuctxsw=process-tree",
        "--cuda-memory-usage=true", "--gpu-metrics-devices=0", "--gpu-metrics-frequency=10000",
        "--output", "r", "--force-overwrite", "true", "--capture-range=cudaProfilerApi", "python3", "-m", "x",
    ]


def test_ncu_argv_defaults_leave_clocks_alone() -> None:
    assert A.ncu_argv("ncu", NcuOptions(), "/o/k", ["./app"]) == [
        "ncu", "--set", "full", "--clock-control", "none", "--export", "/o/k", "--force-overwrite", "./app",
    ]


def test_ncu_argv_full() -> None:
    opts = NcuOptions(set=None, sections=("SpeedOfLight", "Occupancy"), kernel_name="regex:sgemm.*",
                      launch_count=3, launch_skip=2, clock_control="base", import_source=True,
                      nvtx_include=("phase/",), extra=("--target-processes", "all"))
    assert A.ncu_argv("/x/ncu", opts, "k", ["a b", "$X"]) == [
        "/x/ncu", "--section", "SpeedOfLight", "--section", "Occupancy", "--kernel-name", "regex:sgemm.*",
        "--launch-skip", "2", "--launch-count", "3", "--nvtx", "--nvtx-include", "phase/",
        "--clock-control", "base", "--import-source", "yes", "--export", "k", "--force-overwrite",
        "--target-processes", "all", "a b", "$X",
    ]


def test_importer_and_export_argv() -> None:
    assert A.importer_argv("/i/QdstrmImporter", "a.qdstrm", "a.nsys-rep") == [
        "/i/QdstrmImporter", "-i", "a.qdstrm", "-o", "a.nsys-rep"]
    assert A.nsys_export_argv("nsys", "a.nsys-rep", "a.sqlite") == [
        "nsys", "export", "--type", "sqlite", "--force-overwrite", "true", "--output", "a.sqlite",
        "a.nsys-rep"]


def test_remote_importer_argv_finds_it_beside_nsys(tmp_path: Path) -> None:
    import subprocess

    from tests.engine import fake_tools

    fake = fake_tools.install(tmp_path / "root")
    argv = A.find_importer_argv(str(fake.nsys))
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["kernelscope-find-importer", "", str(fake.nsys)]
    # the script is the one the remote shell runs: run it with this machine's sh
    found = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert (found.returncode, found.stdout.strip()) == (0, str(fake.importer))
    link = tmp_path / "bin" / "nsys"  # a symlink on the PATH: the importer is beside its real location
    link.parent.mkdir()
    link.symlink_to(fake.nsys)
    env = {"PATH": f"{link.parent}:/usr/bin:/bin"}
    found = subprocess.run(A.find_importer_argv("nsys"), capture_output=True, text=True, env=env, check=False)
    assert found.stdout.strip() == str(fake.importer)
    assert subprocess.run(A.find_importer_argv("no-such-nsys"), env=env, check=False).returncode == 3
    assert subprocess.run(A.find_importer_argv(str(fake.nsys), str(tmp_path / "none")),
                          check=False).returncode == 4
    assert subprocess.run(A.find_importer_argv("x", str(fake.importer)), capture_output=True, text=True,
                          check=False).stdout.strip() == str(fake.importer)


def test_with_library_path_argv_prepends_for_one_program() -> None:
    import subprocess

    show = [sys.executable, "-c", "import os; print(os.environ.get('LD_LIBRARY_PATH'))"]
    assert A.with_library_path_argv(None, show) == show
    argv = A.with_library_path_argv("/kit/libs dir", show)
    assert argv[:2] == ["sh", "-c"] and argv[3:5] == ["kernelscope-libs", "/kit/libs dir"]
    assert argv[5:] == show
    run = subprocess.run(argv, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=True)
    assert run.stdout.strip() == "/kit/libs dir"
    run = subprocess.run(argv, capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/usr/lib/x"})
    assert run.stdout.strip() == "/kit/libs dir:/usr/lib/x"


def test_session_argv_per_tool() -> None:
    s = SessionSpec(tool="bench", command=("./app",))
    assert A.session_argv(s, None, "/o/app", ["./app"]) == ["./app"]
    assert A.session_argv(s.with_(tool="ncu"), "ncu", "/o/app", ["./app"])[:3] == ["ncu", "--set", "full"]
    with pytest.raises(KernelscopeError, match="No nsys was found"):
        A.session_argv(s.with_(tool="nsys"), None, "/o/app", ["./app"])
    assert A.expected_report("/o/app", "nsys") == Path("/o/app.nsys-rep")
    assert A.expected_report("/o/app", "bench") is None


def test_workload_argv_from_the_real_registry() -> None:
    argv = A.workload_argv("sdpa", {"S": "1024"})
    assert argv[:3] == [sys.executable, "-m", "kernels.sdpa"]
    assert ["--param", "S=1024"] == argv[argv.index("S=1024") - 1: argv.index("S=1024") + 1]
    with pytest.raises(KernelscopeError, match="no workload|No workload|There is no workload"):
        A.workload_argv("no_such_workload", {})


def test_parse_params() -> None:
    assert A.parse_params(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    with pytest.raises(KernelscopeError, match="KEY=VALUE"):
        A.parse_params(["novalue"])


@pytest.mark.parametrize(("kw", "msg"), [
    ({"tool": "perf", "command": ("a",)}, "Unknown tool"),
    ({"command": ()}, "either a command line"),
    ({"command": ("a",), "workload": "sdpa"}, "either a command line"),
    ({"command": ("a",), "params": {"x": "1"}}, "only applies"),
    ({"command": ("a",), "timeout_s": 0}, "must be positive"),
    ({"tool": "nsys", "command": ("a",), "nsys": NsysOptions(trace=("cuda", "gpu"))}, "Unknown nsys trace"),
    ({"tool": "ncu", "command": ("a",), "ncu": NcuOptions(launch_count=-1)}, "zero or more"),
    ({"tool": "ncu", "command": ("a",), "ncu": NcuOptions(clock_control="max")}, "none or base"),
])
def test_validation(kw: dict, msg: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(SpecError, match=msg):
        SessionSpec(**kw).validate()


def test_report_name() -> None:
    assert SessionSpec(command=("/usr/bin/my app!",)).report_name == "my_app"
    assert SessionSpec(workload="sdpa").report_name == "sdpa"
    assert SessionSpec(command=("x",), name="../../etc").report_name == "etc"  # never leaves the folder


def test_json_round_trip(tmp_path: Path) -> None:
    spec = SessionSpec(tool="ncu", command=("./app", "1"), out_dir="/o", timeout_s=60,
                       target=TargetSpec(host="gpu1", user="ana", port=2200, ssh_options=("ProxyJump=b",)),
                       ncu=NcuOptions(kernel_name="saxpy", launch_count=1), env={"CUDA_VISIBLE_DEVICES": "0"})
    spec.save(tmp_path / "spec.json")
    assert SessionSpec.load(tmp_path / "spec.json") == spec
    assert not list(tmp_path.glob(".spec.json.*"))  # no temp file left behind


def test_toml_load(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(
        'tool = "nsys"\nworkload = "sdpa"\ntimeout_s = 120\n[params]\nS = 1024\n'
        '[nsys]\ntrace = ["cuda", "nvtx"]\ncuda_memory_usage = true\n[target]\nhost = "gpu1"\n'
        'remote_importer_libs = "/opt/kit/libs"\n')
    spec = SessionSpec.load(tmp_path / "s.toml")
    assert spec.params == {"S": "1024"} and spec.nsys.trace == ("cuda", "nvtx")
    assert spec.target.remote_importer_libs == "/opt/kit/libs" and spec.target.remote_importer is None
    assert spec.nsys.cuda_memory_usage and spec.target.host == "gpu1" and spec.timeout_s == 120


def test_bad_spec_files(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"tool": "bench", "command": ["x"], "colour": "red"}')
    with pytest.raises(SpecError, match="unknown key 'colour'"):
        SessionSpec.load(tmp_path / "a.json")
    (tmp_path / "b.toml").write_text("tool = ")
    with pytest.raises(SpecError, match="is not valid TOML"):
        SessionSpec.load(tmp_path / "b.toml")
    with pytest.raises(SpecError, match="Could not read"):
        SessionSpec.load(tmp_path / "missing.json")
