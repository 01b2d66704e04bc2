"""Pure functions that build every argv a session launches (no shell strings; tested exactly)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.sessions.spec import NcuOptions, NsysOptions, SessionSpec
from engine.system.errors import KernelscopeError, ToolMissingError


def nsys_profile_argv(nsys: str, opts: NsysOptions, output: str, target: list[str]) -> list[str]:
    """``nsys profile`` for ``target``, writing ``<output>.nsys-rep`` (overwriting)."""
    argv = [nsys, "profile", f"--trace={','.join(opts.trace)}", f"--sample={opts.sample}",
            f"--cpuctxsw={opts.cpuctxsw}"]
    if opts.cuda_memory_usage:
        argv.append("--cuda-memory-usage=true")
    if opts.gpu_metrics_devices is not None:
        argv.append(f"--gpu-metrics-devices={opts.gpu_metrics_devices}")
        if opts.gpu_metrics_frequency_hz is not None:
            argv.append(f"--gpu-metrics-frequency={int(opts.gpu_metrics_frequency_hz)}")
    argv += ["--output", output, "--force-overwrite", "true", *opts.extra, *target]
    return argv


def ncu_argv(ncu: str, opts: NcuOptions, output: str, target: list[str]) -> list[str]:
    """``ncu`` for ``target``, writing ``<output>.ncu-rep`` (overwriting)."""
    argv = [ncu]
    if opts.set:
        argv += ["--set", opts.set]
    for section in opts.sections:
        argv += ["--section", section]
    if opts.kernel_name:
        argv += ["--kernel-name", opts.kernel_name]
    if opts.launch_skip is not None:
        argv += ["--launch-skip", str(opts.launch_skip)]
    if opts.launch_count is not None:
        argv += ["--launch-count", str(opts.launch_count)]
    if opts.nvtx_include:
        argv.append("--nvtx")
        for rng in opts.nvtx_include:
            argv += ["--nvtx-include", rng]
    argv += ["--clock-control", opts.clock_control]
    if opts.import_source:
        argv += ["--import-source", "yes"]
    argv += ["--export", output, "--force-overwrite", *opts.extra, *target]
    return argv


def importer_argv(importer: str, qdstrm: str, rep: str) -> list[str]:
    """Nsight Systems' stand-alone importer: ``.qdstrm`` -> ``.nsys-rep``."""
    return [importer, "-i", qdstrm, "-o", rep]


# Remote lookup of QdstrmImporter: $1 an explicit path (may be empty), $2 the nsys to look beside (a path
# or a name on the remote PATH). Prints the importer's path; exit 3: no such nsys, 4: no importer. The
# candidates are those of engine.sessions.doctor.qdstrm_importer_candidates (Nsight Systems' layout and
# the copy inside Nsight Compute).
FIND_IMPORTER_SCRIPT = (
    'e=$1; n=$2; '
    'if [ -n "$e" ]; then if [ -f "$e" ] && [ -x "$e" ]; then echo "$e"; exit 0; fi; exit 4; fi; '
    'case $n in */*) ;; *) n=$(command -v "$n") || exit 3;; esac; '
    'n=$(readlink -f "$n" 2>/dev/null || echo "$n"); d=${n%/*}; '
    'for c in "$d/QdstrmImporter" "$d"/../host-linux-*/QdstrmImporter "$d"/../linux-desktop-*/QdstrmImporter '
    '"$d"/../*/QdstrmImporter "$d"/../../host-linux-*/QdstrmImporter; do '
    'if [ -f "$c" ] && [ -x "$c" ]; then readlink -f "$c" 2>/dev/null || echo "$c"; exit 0; fi; done; exit 4'
)
# Run "$@" with $1 prepended to LD_LIBRARY_PATH (for one program only).
LIBRARY_PATH_SCRIPT = (
    'l=$1; shift; LD_LIBRARY_PATH="$l${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; export LD_LIBRARY_PATH; '
    'exec "$@"'
)


def find_importer_argv(nsys: str, explicit: str | None = None) -> list[str]:
    """The remote argv that prints where QdstrmImporter is, for ``nsys`` (or checks ``explicit``)."""
    return ["sh", "-c", FIND_IMPORTER_SCRIPT, "kernelscope-find-importer", explicit or "", nsys]


def with_library_path_argv(libs: str | None, argv: list[str]) -> list[str]:
    """``argv`` run with ``libs`` prepended to LD_LIBRARY_PATH (unchanged when ``libs`` is empty)."""
    if not libs:
        return list(argv)
    return ["sh", "-c", LIBRARY_PATH_SCRIPT, "kernelscope-libs", libs, *argv]


def nsys_export_argv(nsys: str, rep: str, sqlite: str) -> list[str]:
    """``nsys export`` of a report to SQLite (the same argv as engine.reports.nsys.rep uses)."""
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", sqlite, rep]


def parse_params(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` -> dict.

    Raises:
        KernelscopeError: an item has no ``=``.
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise KernelscopeError(f"--param {item!r} is not KEY=VALUE; write e.g. --param iters=100.")
        out[key.strip()] = value
    return out


def workload_argv(name: str, params: Mapping[str, str]) -> list[str]:
    """The argv of a kernels/ workload, from ``kernels.registry.get_workload(name).argv(params)``.

    Raises:
        ToolMissingError: the registry is not installed.
        KernelscopeError: the workload is unknown or rejects the parameters.
    """
    try:
        registry: Any = importlib.import_module("kernels.registry")
    except ImportError as exc:
        raise ToolMissingError(
            "The kernels/ workload registry (kernels.registry) is not available in this install; run a "
            "command line after -- instead, or install Kernelscope from a checkout that has kernels/."
        ) from exc
    try:
        workload = registry.get_workload(name)
    except KernelscopeError:
        raise
    except (KeyError, LookupError, ValueError) as exc:
        known = getattr(registry, "WORKLOADS", None) or getattr(registry, "workloads", None)
        names = ", ".join(sorted(known)) if isinstance(known, Mapping) else ""
        raise KernelscopeError(
            f"There is no workload named {name!r}" + (f"; known workloads: {names}." if names else ".")
        ) from exc
    try:
        argv = [str(a) for a in workload.argv(dict(params))]
    except KernelscopeError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        raise KernelscopeError(f"Workload {name!r} rejected its parameters ({exc}).") from exc
    if not argv:
        raise KernelscopeError(f"Workload {name!r} produced an empty command line.")
    return argv


def target_argv(spec: SessionSpec) -> list[str]:
    """What the session runs, before any profiler is put in front of it."""
    if spec.workload:
        return workload_argv(spec.workload, spec.params)
    return list(spec.command)


def session_argv(spec: SessionSpec, tool_path: str | None, output_base: str, target: list[str]) -> list[str]:
    """The full argv of a session's main step.

    Args:
        spec: The session.
        tool_path: The nsys/ncu executable (ignored for bench).
        output_base: Report path without extension.
        target: The program's argv (see :func:`target_argv`).
    """
    if spec.tool == "bench":
        return list(target)
    if not tool_path:
        raise ToolMissingError(f"No {spec.tool} was found; install it or pass its path.")
    if spec.per_rank or spec.profile_ranks:
        return per_rank_session_argv(spec, tool_path, output_base, target)
    if spec.tool == "nsys":
        return nsys_profile_argv(tool_path, spec.nsys, output_base, target)
    return ncu_argv(tool_path, spec.ncu, output_base, target)


def per_rank_session_argv(spec: SessionSpec, tool_path: str, output_base: str, target: list[str],
                          env: Mapping[str, str] | None = None) -> list[str]:
    """The launcher command with nsys/ncu inside every (chosen) rank, one report per rank.

    Raises:
        LauncherError: ``target`` does not start with a known launcher, or has no program.
    """
    from engine.sessions import launchers as L

    line = L.split(target, env)
    ranks = L.parse_ranks(spec.profile_ranks)
    out = L.rank_output(output_base, L.rank_var(line, ranks))
    if spec.tool == "nsys":
        profiler = nsys_profile_argv(tool_path, spec.nsys, out, [])
    else:
        profiler = ncu_argv(tool_path, spec.ncu, out, [])
    return L.per_rank_argv(line, profiler, ranks)


def report_suffix(tool: str) -> str | None:
    """The report file extension a tool writes (None for bench)."""
    return {"nsys": ".nsys-rep", "ncu": ".ncu-rep"}.get(tool)


def expected_report(output_base: str, tool: str) -> Path | None:
    """Where the tool will write its report."""
    suffix = report_suffix(tool)
    return Path(output_base + suffix) if suffix else None
