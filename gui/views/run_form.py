"""The Run form as plain values (no Qt): :class:`FormValues` and the pure functions around them.

:func:`spec_from_form` turns the form into an :class:`engine.sessions.spec.SessionSpec` (one sentence
naming the field to fix when it cannot), :func:`defaults_from_doctor` chooses the defaults the
doctor's findings call for (device=cuda and telemetry only where there is a GPU),
:func:`report_to_open` picks the report a finished session opens, and :func:`quote_command` writes
an argv back as a command line. Tested without widgets; import-linter keeps Qt out of this module.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from engine.system.errors import KernelscopeError

if TYPE_CHECKING:
    from engine.sessions.doctor import Check
    from engine.sessions.spec import SessionSpec, TargetSpec

NSYS_TRACE_CHOICES = ("cuda", "nvtx", "osrt", "cublas", "cudnn", "cusparse")
NCU_SETS = ("full", "detailed", "basic", "roofline", "(ncu default)")
TOOL_LABELS = {"bench": "Benchmark only (no profiler)", "nsys": "Nsight Systems (nsys)",
               "ncu": "Nsight Compute (ncu)"}


class RunFormError(KernelscopeError):
    """The Run form has a value that cannot become a session."""


@dataclass(frozen=True)
class FormValues:
    """What the Run form holds, as plain values (strings where the user types text)."""

    target: str = "local"  # local | ssh
    host: str = ""
    user: str = ""
    port: int = 0  # 0: ssh's default
    identity_file: str = ""
    known_hosts: str = ""  # empty: ssh's own (~/.ssh/known_hosts)
    remote_dir: str = ""  # empty: ~/.kernelscope/sessions on the host
    what: str = "workload"  # workload | command
    workload: str = ""
    params: dict[str, str] = field(default_factory=dict)
    command: str = ""
    cwd: str = ""  # the program's working directory here; empty: the directory Kernelscope runs in
    remote_cwd: str = ""  # on an SSH host; empty: the remote home
    per_rank: bool = False  # the command is torchrun/srun/mpirun: one report per rank
    profile_ranks: str = ""  # with per_rank: only these ranks ("0,3"); empty: all
    tool: str = "bench"
    nsys_trace: tuple[str, ...] = ("cuda", "nvtx", "osrt")
    nsys_cuda_memory: bool = False
    nsys_gpu_metrics: bool = False
    nsys_gpu_metrics_devices: str = "all"
    ncu_set: str = "full"
    ncu_kernel: str = ""
    ncu_launch_count: int = 0  # 0: every launch
    ncu_clock_control: str = "none"
    out_dir: str = ""
    timeout_s: float = 3600.0  # 0: none
    telemetry: bool = True  # record GPU telemetry beside the reports (said in the log when unavailable)


def _target_of(v: FormValues) -> TargetSpec:
    """Where to run: this machine, or the SSH host of the form (its fields checked)."""
    from engine.sessions.spec import TargetSpec

    if v.target != "ssh":
        return TargetSpec()
    host = v.host.strip()
    if not host:
        raise RunFormError("Enter the SSH host name (or choose This machine).")
    if any(c.isspace() for c in host) or host.startswith("-"):
        raise RunFormError(f"The SSH host {host!r} is not a valid host name.")
    ident = v.identity_file.strip()
    if ident and not Path(ident).expanduser().is_file():
        raise RunFormError(f"The identity file {ident} does not exist; choose an existing key file or "
                           "leave it empty.")
    known = v.known_hosts.strip()
    if known and not Path(known).expanduser().is_file():
        raise RunFormError(f"The known-hosts file {known} does not exist; choose an existing file or "
                           "leave it empty.")
    return TargetSpec(host=host, user=v.user.strip() or None, port=v.port or None,
                      identity_file=ident or None, known_hosts=known or None,
                      remote_dir=v.remote_dir.strip() or TargetSpec.remote_dir)


def _what_of(v: FormValues) -> tuple[tuple[str, ...], str | None, dict[str, str]]:
    """(command, workload, the workload's parameters that differ from their defaults)."""
    if v.what == "command":
        try:
            command = tuple(shlex.split(v.command))
        except ValueError as exc:
            raise RunFormError(f"The command line cannot be split into words ({exc}); check its quotes.") \
                from exc
        if not command:
            raise RunFormError("Enter a command line to run (for example: python3 train.py --steps 10).")
        return command, None, {}
    from kernels.registry import get_workload

    if not v.workload:
        raise RunFormError("Choose a workload to run.")
    w = get_workload(v.workload)
    params: dict[str, str] = {}
    for k, val in v.params.items():
        val = val.strip()
        if not val:
            raise RunFormError(f"Parameter {k} of {w.name} is empty; enter a value (default "
                               f"{w.params.get(k, '?')}).")
        if val != w.params.get(k):
            params[k] = val
    w.resolve(params)  # unknown names, values outside their choices: one sentence
    return (), w.name, params


def _folders_of(v: FormValues, target: TargetSpec) -> tuple[Path, str | None]:
    """(the output folder, the working directory: None for the default)."""
    out_dir = v.out_dir.strip()
    if not out_dir:
        raise RunFormError("Choose an output folder for the session's log and reports.")
    out = Path(out_dir).expanduser()
    if out.exists() and not out.is_dir():
        raise RunFormError(f"The output folder {out} is a file; choose a folder.")
    cwd: str | None = None
    if not target.is_local:
        cwd = v.remote_cwd.strip() or None  # checked on the host when the session starts
    elif v.cwd.strip():
        wd = Path(v.cwd.strip()).expanduser()
        if not wd.is_dir():
            raise RunFormError(f"The working directory {wd} is not a folder; choose an existing folder "
                               "(the program runs there, as it would in a shell).")
        cwd = str(wd)
    return out, cwd


def spec_from_form(v: FormValues) -> SessionSpec:
    """The :class:`~engine.sessions.spec.SessionSpec` for the form's values (pure).

    The command line is split like a POSIX shell would split it (``shlex``) but never run by a
    shell. Workload parameters equal to their defaults are left out of the spec.

    Raises:
        KernelscopeError: one sentence naming the field to fix.
    """
    from engine.sessions.spec import NcuOptions, NsysOptions, SessionSpec

    target = _target_of(v)
    command, workload, params = _what_of(v)
    out, cwd = _folders_of(v, target)
    if v.timeout_s < 0:
        raise RunFormError("The timeout must be zero (none) or a positive number of seconds.")
    metrics = v.nsys_gpu_metrics_devices.strip() if v.nsys_gpu_metrics else None
    if v.nsys_gpu_metrics and not metrics:
        raise RunFormError("Enter the GPUs to sample metrics on (all, or indices like 0,1).")
    if v.tool == "nsys" and not v.nsys_trace:
        raise RunFormError("Choose at least one API to trace with nsys.")
    ncu_set = None if v.ncu_set.startswith("(") else v.ncu_set
    spec = SessionSpec(
        tool=v.tool, command=command, workload=workload, params=params, out_dir=str(out),
        timeout_s=v.timeout_s or None, target=target, telemetry=v.telemetry, cwd=cwd,
        per_rank=v.what == "command" and v.per_rank,
        profile_ranks=(v.profile_ranks.strip() or None) if v.what == "command" and v.per_rank else None,
        nsys=NsysOptions(trace=tuple(v.nsys_trace), cuda_memory_usage=v.nsys_cuda_memory,
                         gpu_metrics_devices=metrics),
        ncu=NcuOptions(set=ncu_set, kernel_name=v.ncu_kernel.strip() or None,
                       launch_count=v.ncu_launch_count or None, clock_control=v.ncu_clock_control),
    )
    return spec.validate()


def report_to_open(reports: tuple[Path, ...] | list[Path]) -> Path | None:
    """Which of a session's reports to open: the SQLite export (opens without nsys), else the first
    report that is not a raw ``.qdstrm`` stream."""
    usable = [Path(p) for p in reports if not str(p).endswith(".qdstrm")]
    sqlite = [p for p in usable if p.suffix == ".sqlite"]
    return (sqlite or usable)[0] if usable else None


def reports_to_open(reports: tuple[Path, ...] | list[Path]) -> list[Path]:
    """The reports a finished session opens: every rank's (``NAME_rank<N>``, SQLite export preferred) for
    a per-rank session, so the Ranks view can line them up; else :func:`report_to_open`'s one."""
    import re

    ranks: dict[str, Path] = {}
    for p in (Path(x) for x in reports if not str(x).endswith(".qdstrm")):
        stem = p.name.rsplit(".", 1)[0]
        if re.search(r"_rank\d+$", stem) and (stem not in ranks or p.suffix == ".sqlite"):
            ranks[stem] = p
    if len(ranks) > 1:
        return [ranks[k] for k in sorted(ranks, key=lambda k: int(k.rsplit("_rank", 1)[1]))]
    one = report_to_open(reports)
    return [one] if one is not None else []


def default_out_dir() -> Path:
    """Sessions go under Kernelscope's data dir unless the user picks another folder."""
    from engine.sessions.store import data_root

    return data_root() / "sessions"


@dataclass(frozen=True)
class FormDefaults:
    """What the form starts with on this machine (from the doctor's GPU checks)."""

    has_gpu: bool
    device: str  # the workloads' ``device`` parameter
    telemetry: bool
    note: str  # one sentence for the form: why these defaults


def defaults_from_doctor(checks: Sequence[Check]) -> FormDefaults:
    """device=cuda and telemetry on only where the doctor found a usable GPU; else the CPU, no
    telemetry, and the doctor's sentence saying why."""
    from engine.sessions.doctor import OK

    gpus = [c for c in checks if c.name.startswith("gpu ") and c.status == OK]
    if gpus:
        n = len(gpus)
        return FormDefaults(True, "cuda", True, f"{n} GPU{'s' if n != 1 else ''} found: workloads run on "
                            "CUDA and GPU telemetry is recorded beside the reports.")
    why = next((c.detail for c in checks if c.name == "driver" and c.detail), "No GPU was found.")
    return FormDefaults(False, "cpu", False, f"{why} Workloads default to the CPU and telemetry is off.")


def last_cwd(remembered: str | None, fallback: str) -> str:
    """The working directory the form starts in: the last one used while it still exists, else
    ``fallback`` (the directory Kernelscope was started in)."""
    if remembered and Path(remembered).expanduser().is_dir():
        return remembered
    return fallback


def quote_command(argv: list[str]) -> str:
    """A command line that ``shlex.split`` turns back into ``argv``, readable when an argument holds
    single quotes (``-c "print('hi')"`` rather than shlex.join's ``'print('"'"'hi'"'"')'``)."""
    out = []
    for a in argv:
        if a and shlex.quote(a) == a:
            out.append(a)
        elif not any(c in a for c in '"\\$`!'):
            out.append(f'"{a}"')
        else:
            out.append(shlex.quote(a))
    return " ".join(out)


__all__ = ["FormDefaults", "FormValues", "RunFormError", "defaults_from_doctor", "default_out_dir",
           "last_cwd", "quote_command", "report_to_open", "reports_to_open",
           "spec_from_form"]
