"""Distributed launchers (torchrun, srun, mpirun): put nsys or ncu inside every rank, one report per rank.

``kernelscope run --tool nsys --per-rank -- torchrun --nproc-per-node 2 train.py`` becomes::

    torchrun --nproc-per-node 2 --no-python
        nsys profile ... --output DIR/train_rank%q{RANK} python3 -u train.py

so each rank writes ``train_rank<N>.nsys-rep`` named by the launcher's rank variable (``RANK`` for
torchrun, ``SLURM_PROCID`` for srun, ``OMPI_COMM_WORLD_RANK`` / ``PMI_RANK`` / ``PMIX_RANK`` for mpirun).
``--profile-ranks 0,3`` (or a launcher whose rank variable is not known in advance) adds a small
``sh`` wrapper in each rank that reads the rank, exports it as ``KERNELSCOPE_RANK``, and runs the
profiler only on the chosen ranks (the others run the program alone). Everything is an argv list.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.system.errors import KernelscopeError

#: the variable the wrapper exports, used in the report name when the wrapper is in place
WRAPPER_VAR = "KERNELSCOPE_RANK"
# $1: rank variables to try in order, $2: ranks to profile ("" = all), $3: how many profiler words
# follow before the program. Runs "$@" (profiler + program) on a chosen rank, else the program alone.
RANK_WRAPPER = (
    'vars=$1; sel=$2; n=$3; shift 3; r=; '
    'for v in $vars; do eval "r=\\${$v-}"; [ -n "$r" ] && break; done; '
    'KERNELSCOPE_RANK=$r; export KERNELSCOPE_RANK; '
    'case ",$sel," in ,,|*,"$r",*) exec "$@";; esac; shift "$n"; exec "$@"'
)


@dataclass(frozen=True)
class Launcher:
    """What Kernelscope knows about one launcher's command line.

    Attributes:
        name: ``torchrun``, ``srun`` or ``mpirun``.
        rank_vars: Environment variables that hold a rank's global number, tried in order.
        flags: Options that take no value.
        two_values: Options followed by two values (``--mca KEY VALUE``).
    """

    name: str
    rank_vars: tuple[str, ...]
    flags: frozenset[str]
    two_values: frozenset[str] = frozenset()


TORCHRUN = Launcher("torchrun", ("RANK",), frozenset({
    "--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module",
    "--help", "-h"}))
SRUN = Launcher("srun", ("SLURM_PROCID",), frozenset({
    "-l", "--label", "-u", "--unbuffered", "-K", "-Q", "--quiet", "-v", "--verbose", "-X",
    "--disable-status", "--exclusive", "--overlap", "--exact", "--pty", "-E", "--preserve-env", "-Z",
    "--no-allocate", "-O", "--overcommit", "--contiguous", "--multi-prog", "-k", "--no-kill", "-H",
    "--hold", "-s", "--oversubscribe", "--spread-job", "--test-only", "--wait-all-nodes"}))
MPIRUN = Launcher("mpirun", ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"), frozenset({
    "-oversubscribe", "--oversubscribe", "-q", "--quiet", "-v", "--verbose", "--allow-run-as-root",
    "-allow-run-as-root", "--tag-output", "-tag-output", "--timestamp-output", "-timestamp-output",
    "--report-bindings", "-report-bindings", "--display-map", "-display-map", "-l", "-prepend-rank",
    "--prepend-rank", "-genvall", "-envall", "-genvnone", "-envnone", "--noprefix", "-noprefix",
    "--use-hwthread-cpus", "-use-hwthread-cpus", "-nolocal", "--nolocal", "-hostfile-only"}),
    frozenset({"--mca", "-mca", "-gmca", "--gmca", "-genv", "-env", "--prtemca", "-prtemca"}))
_BY_NAME = {"torchrun": TORCHRUN, "srun": SRUN, "mpirun": MPIRUN, "mpiexec": MPIRUN,
            "mpiexec.hydra": MPIRUN, "orterun": MPIRUN, "prterun": MPIRUN}
_RANK_FILE = re.compile(r"_rank(\d+)$")


class LauncherError(KernelscopeError):
    """The command line is not one Kernelscope can put a profiler into, rank by rank."""


@dataclass(frozen=True)
class LaunchLine:
    """A launcher command split in two.

    Attributes:
        launcher: Which launcher.
        head: The launcher and its own options (for ``python -m torch.distributed.run``, the Python
            words included).
        program: What every rank runs.
        python: The interpreter a torchrun rank would use (torchrun runs Python scripts itself).
    """

    launcher: Launcher
    head: tuple[str, ...]
    program: tuple[str, ...]
    python: str | None = None


def detect(argv: list[str]) -> Launcher | None:
    """The launcher that ``argv`` starts with (``python -m torch.distributed.run`` is torchrun)."""
    if not argv:
        return None
    base = Path(argv[0]).name
    if base in _BY_NAME:
        return _BY_NAME[base]
    if base.startswith("python") and len(argv) > 2 and argv[1] == "-m" and \
            argv[2] in ("torch.distributed.run", "torch.distributed.launch"):
        return TORCHRUN
    return None


def _interpreter_of(script: str, env: Mapping[str, str]) -> str | None:
    """The Python in a console script's ``#!`` line (torchrun's ranks run under it)."""
    path = shutil.which(script, path=env.get("PATH", os.defpath)) if "/" not in script else script
    if not path:
        return None
    try:
        with open(path, "rb") as fh:
            first = fh.readline(512).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if first.startswith("#!"):
        words = first[2:].split()
        if words and "python" in Path(words[-1] if words[0].endswith("env") else words[0]).name:
            return words[-1] if words[0].endswith("env") else words[0]
    return None


def split(argv: list[str], env: Mapping[str, str] | None = None) -> LaunchLine:
    """Split a launcher command into the launcher's part and the program each rank runs.

    Raises:
        LauncherError: not a known launcher, or no program after its options.
    """
    env = os.environ if env is None else env
    launcher = detect(argv)
    if launcher is None:
        raise LauncherError(
            f"One report per rank (--per-rank) needs the command to start with torchrun, srun, mpirun or "
            f"mpiexec (it starts with {Path(argv[0]).name if argv else 'nothing'}); or turn it off to record "
            "one report around the whole command.")
    i = 3 if Path(argv[0]).name.startswith("python") else 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or a == "-":
            break
        if "=" in a and a.startswith("--"):
            i += 1
        elif a in launcher.flags:
            i += 1
        elif a in launcher.two_values:
            i += 3
        elif len(a) > 2 and not a.startswith("--") and launcher is not MPIRUN:
            i += 1  # -n2: short option with its value attached
        else:
            i += 2
    head, program = tuple(argv[:i]), tuple(argv[i:])
    if not program:
        raise LauncherError(f"No program was found after {launcher.name}'s options in "
                            f"{' '.join(argv)}; put the program and its arguments last.")
    python = None
    if launcher is TORCHRUN:
        if Path(argv[0]).name.startswith("python"):
            python = argv[0]
        else:
            python = _interpreter_of(argv[0], env) or sys.executable
    return LaunchLine(launcher, head, program, python)


def parse_ranks(text: str | None) -> tuple[int, ...]:
    """``"0,3"`` or ``"0-3,8"`` → (0, 3) / (0, 1, 2, 3, 8); empty or None → () (every rank).

    Raises:
        LauncherError: not a list of non-negative integers and ranges.
    """
    if not text or not text.strip():
        return ()
    out: list[int] = []
    for part in text.split(","):
        p = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", p)
        if not m:
            raise LauncherError(f"--profile-ranks {text!r} is not a list of ranks; write e.g. 0,3 or 0-3.")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise LauncherError(f"--profile-ranks range {p!r} runs backwards; write {hi}-{lo}.")
        out += range(lo, hi + 1)
    return tuple(dict.fromkeys(out))


def rank_output(output_base: str, var: str) -> str:
    """The report base name with the rank substituted by the profiler (``NAME_rank%q{VAR}``)."""
    return f"{output_base}_rank%q{{{var}}}"


def per_rank_argv(line: LaunchLine, profiler: list[str], profile_ranks: tuple[int, ...] = ()) -> list[str]:
    """The launcher's command with ``profiler`` (the nsys/ncu words) in front of each rank's program.

    Args:
        line: The split launcher command.
        profiler: nsys/ncu argv whose output name carries the rank (see :func:`rank_output`).
        profile_ranks: Only these ranks are profiled (empty: all).
    """
    head = list(line.head)
    program = list(line.program)
    if line.launcher is TORCHRUN:
        first = 3 if Path(head[0]).name.startswith("python") else 1
        is_module = any(a in ("-m", "--module") for a in head[first:])
        if not any(a in ("--no-python", "--no_python") for a in head[first:]):
            rest = [a for a in head[first:] if a not in ("-m", "--module")]
            head = [*head[:first], *rest, "--no-python"]
            program = [line.python or sys.executable, "-u", *(["-m"] if is_module else []), *program]
    wrapped = len(line.launcher.rank_vars) > 1 or bool(profile_ranks)
    if not wrapped:
        return [*head, *profiler, *program]
    sel = ",".join(str(r) for r in profile_ranks)
    return [*head, "sh", "-c", RANK_WRAPPER, "kernelscope-rank", " ".join(line.launcher.rank_vars), sel,
            str(len(profiler)), *profiler, *program]


def rank_var(line: LaunchLine, profile_ranks: tuple[int, ...] = ()) -> str:
    """The variable the report name uses: the launcher's own, or the wrapper's."""
    if len(line.launcher.rank_vars) > 1 or profile_ranks:
        return WRAPPER_VAR
    return line.launcher.rank_vars[0]


def rank_names(names: list[str], report_name: str, suffix: str) -> list[str]:
    """The file names ``<name>_rank<N><suffix>`` among ``names``, by rank number."""
    found = []
    for n in names:
        if n.startswith(f"{report_name}_rank") and n.endswith(suffix):
            m = _RANK_FILE.search(n[: -len(suffix)] if suffix else n)
            if m and n[: -len(suffix) or None] == f"{report_name}_rank{m.group(1)}":
                found.append((int(m.group(1)), n))
    return [n for _, n in sorted(found)]


def rank_reports(folder: Path, report_name: str, suffix: str) -> list[Path]:
    """The per-rank reports ``<name>_rank<N><suffix>`` in ``folder``, by rank number."""
    found = []
    for p in folder.glob(f"{report_name}_rank*{suffix}"):
        m = _RANK_FILE.search(p.name[: -len(suffix)])
        if m and p.is_file() and p.stat().st_size > 0:
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]
