"""The Run form model (gui/views/run_form.py): FormValues -> SessionSpec, the doctor's defaults, the
working directory. Plain values, no widgets, no QApplication: the module imports no Qt (a subprocess
checks it, as import-linter does)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_the_form_model_works_where_qt_cannot_be_imported(tmp_path: Path) -> None:
    """With PySide6 and pyqtgraph made unimportable, the form model still builds a spec."""
    code = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph'):
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
from gui.views.run_form import FormValues, spec_from_form
spec = spec_from_form(FormValues(what='command', command='python3 train.py', cwd={str(tmp_path)!r},
                                 out_dir={str(tmp_path / 'out')!r}))
assert not [m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph'))]
print(spec.command, spec.cwd)
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"('python3', 'train.py') {tmp_path}"


# -- the form as a spec (pure) ------------------------------------------------------------------------
def test_spec_from_form_workload_command_and_options(tmp_path: Path) -> None:
    from engine.system.errors import KernelscopeError
    from gui.views.run_form import FormValues, spec_from_form
    from kernels.registry import get_workload

    defaults = dict(get_workload("sdpa").params)
    spec = spec_from_form(FormValues(workload="sdpa", params={**defaults, "S": "1024", "dtype": "bf16"},
                                     tool="ncu", ncu_kernel="regex:flash", ncu_launch_count=3,
                                     out_dir=str(tmp_path), timeout_s=0))
    # only the changed parameters are kept; the rest are the workload's defaults
    assert (spec.workload, spec.params, spec.command) == ("sdpa", {"S": "1024", "dtype": "bf16"}, ())
    assert (spec.ncu.set, spec.ncu.kernel_name, spec.ncu.launch_count, spec.ncu.clock_control) == (
        "full", "regex:flash", 3, "none")
    assert spec.timeout_s is None and spec.target.is_local
    spec = spec_from_form(FormValues(what="command", command="python3 -c 'print(1 + 1)'", tool="nsys",
                                     nsys_trace=("cuda",), nsys_cuda_memory=True, nsys_gpu_metrics=True,
                                     out_dir=str(tmp_path), target="ssh", host="gpu1", user="me", port=2222))
    assert spec.command == ("python3", "-c", "print(1 + 1)")
    assert (spec.nsys.trace, spec.nsys.cuda_memory_usage, spec.nsys.gpu_metrics_devices) == (
        ("cuda",), True, "all")
    assert (spec.target.host, spec.target.user, spec.target.port) == ("gpu1", "me", 2222)
    bad = [
        (FormValues(what="command", command="  ", out_dir=str(tmp_path)), "Enter a command line"),
        (FormValues(what="command", command="python3 'unclosed", out_dir=str(tmp_path)), "check its quotes"),
        (FormValues(workload="sdpa", params={"dtype": "int4"}, out_dir=str(tmp_path)),
         "Parameter dtype=int4 is not valid for 'sdpa'; choose one of: fp16, bf16, fp32."),
        (FormValues(workload="gemm", params={"M": ""}, out_dir=str(tmp_path)),
         "Parameter M of gemm is empty"),
        (FormValues(what="command", command="ls", target="ssh", out_dir=str(tmp_path)), "Enter the SSH host"),
        (FormValues(what="command", command="ls", out_dir=""), "Choose an output folder"),
        (FormValues(what="command", command="ls", tool="nsys", nsys_trace=(), out_dir=str(tmp_path)),
         "at least one API"),
    ]
    for values, words in bad:
        with pytest.raises(KernelscopeError, match=None) as info:
            spec_from_form(values)
        assert words in str(info.value), str(info.value)


def test_quote_command_round_trips_through_shlex() -> None:
    import shlex

    from gui.views.run_form import quote_command

    cases = [["python3", "-c", "print('hi')"], ["a b", "", "x\"y", "$HOME", "back\\slash", "it's \"both\""],
             ["plain", "--k=v", "/p/a.py"]]
    for argv in cases:
        assert shlex.split(quote_command(argv)) == argv
    assert quote_command(["python3", "-c", "print('hi')"]) == 'python3 -c "print(\'hi\')"'


def test_report_to_open_prefers_the_sqlite_export() -> None:
    from gui.views.run_form import report_to_open

    assert report_to_open([Path("a.nsys-rep"), Path("a.sqlite")]) == Path("a.sqlite")
    assert report_to_open([Path("a.qdstrm"), Path("b.ncu-rep")]) == Path("b.ncu-rep")
    assert report_to_open([Path("a.qdstrm")]) is None and report_to_open([]) is None


def test_working_directory_goes_into_the_spec(tmp_path: Path) -> None:
    from engine.system.errors import KernelscopeError
    from gui.views.run_form import FormValues, spec_from_form

    base = dict(what="command", command="python3 train.py", out_dir=str(tmp_path / "out"))
    assert spec_from_form(FormValues(**base, cwd=str(tmp_path))).cwd == str(tmp_path)
    assert spec_from_form(FormValues(**base)).cwd is None  # empty: where Kernelscope runs
    with pytest.raises(KernelscopeError, match="is not a folder"):
        spec_from_form(FormValues(**base, cwd=str(tmp_path / "missing")))
    # on an SSH host the remote field counts (checked there), the local one does not
    remote = spec_from_form(FormValues(**base, cwd=str(tmp_path / "missing"), target="ssh", host="gpu1",
                                       remote_cwd="~/proj"))
    assert remote.cwd == "~/proj"
    assert spec_from_form(FormValues(**base, target="ssh", host="gpu1")).cwd is None  # the remote home


def test_last_cwd_is_offered_while_it_exists(tmp_path: Path) -> None:
    from gui.views.run_form import last_cwd

    assert last_cwd(str(tmp_path), "/fallback") == str(tmp_path)
    assert last_cwd(str(tmp_path / "gone"), os.getcwd()) == os.getcwd()
    assert last_cwd(None, "/fallback") == "/fallback"


def test_defaults_follow_the_doctor() -> None:
    from engine.sessions.doctor import MISSING, OK, Check, check_gpus
    from gui.views.run_form import defaults_from_doctor

    gpu = [Check("driver", OK, "580.1", None, "The NVIDIA driver is loaded."),
           Check("gpu 0", OK, None, None, "NVIDIA H100: 80 GiB.")]
    d = defaults_from_doctor(gpu)
    assert (d.has_gpu, d.device, d.telemetry) == (True, "cuda", True) and d.note.startswith("1 GPU found")
    none = [Check("driver", MISSING, None, None, "No GPU can be used here: no NVIDIA driver.")]
    d = defaults_from_doctor(none)
    assert (d.has_gpu, d.device, d.telemetry) == (False, "cpu", False)
    assert d.note == ("No GPU can be used here: no NVIDIA driver. Workloads default to the CPU and "
                      "telemetry is off.")
    # this machine, through the real doctor check (CI has no GPU: the CPU)
    here = defaults_from_doctor(check_gpus())
    assert here.device == ("cuda" if here.has_gpu else "cpu") and here.telemetry is here.has_gpu
