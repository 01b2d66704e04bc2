"""A session spec: what to run, where, under which tool. Typed, and saved beside its results.

A spec is plain data (frozen dataclasses) so the GUI form, the CLI and a saved file all produce the
same object. It is written as ``spec.json`` in the session folder and can be read back from JSON or
TOML (``SessionSpec.load``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from engine.system.atomic import atomic_write_text
from engine.system.errors import KernelscopeError

ToolName = Literal["bench", "nsys", "ncu"]
TOOLS: tuple[str, ...] = ("bench", "nsys", "ncu")
NSYS_TRACES = (
    "cuda", "nvtx", "osrt", "cublas", "cudnn", "cusparse", "opengl", "mpi", "ucx", "oshmem", "none",
)


class SpecError(KernelscopeError):
    """A session spec is invalid."""


@dataclass(frozen=True)
class NsysOptions:
    """``nsys profile`` options.

    Attributes:
        trace: APIs to trace (``--trace``).
        sample: CPU sampling (``--sample``): ``none`` needs no perf events.
        cpuctxsw: CPU context-switch tracing (``--cpuctxsw``): ``none`` needs no perf events.
        cuda_memory_usage: Track GPU memory allocations (``--cuda-memory-usage=true``).
        gpu_metrics_devices: GPUs to sample hardware metrics on (``--gpu-metrics-devices``), e.g.
            ``"0"`` or ``"all"``; None for no GPU metrics.
        gpu_metrics_frequency_hz: Sampling rate of GPU metrics (``--gpu-metrics-frequency``).
        extra: More raw nsys arguments, placed before the target program.
    """

    trace: tuple[str, ...] = ("cuda", "nvtx", "osrt")
    sample: str = "none"
    cpuctxsw: str = "none"
    cuda_memory_usage: bool = False
    gpu_metrics_devices: str | None = None
    gpu_metrics_frequency_hz: int | None = None
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class NcuOptions:
    """``ncu`` options.

    Attributes:
        set: Section set (``--set``), e.g. ``full``, ``detailed``, ``basic``; None for ncu's default.
        sections: Extra sections (``--section`` each).
        kernel_name: Only kernels with this name (``--kernel-name``; ``regex:`` prefix allowed).
        launch_count: Profile at most this many launches (``--launch-count``).
        launch_skip: Skip this many matching launches first (``--launch-skip``).
        clock_control: ``none`` (default) leaves the GPU clocks alone, so numbers match real runs;
            ``base`` locks them to base clocks (ncu's own default).
        import_source: Embed source for source-level counters (``--import-source yes``).
        nvtx_include: NVTX range filters (``--nvtx --nvtx-include`` each).
        extra: More raw ncu arguments, placed before the target program.
    """

    set: str | None = "full"
    sections: tuple[str, ...] = ()
    kernel_name: str | None = None
    launch_count: int | None = None
    launch_skip: int | None = None
    clock_control: str = "none"
    import_source: bool = False
    nvtx_include: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()


@dataclass(frozen=True)
class TargetSpec:
    """Where the session runs: this machine (``host`` None) or an SSH host.

    The SSH fields mirror :class:`engine.system.ssh.SshTarget`; ``remote_dir`` is the folder on the
    host that receives one sub-folder per session (relative paths are under the remote home).
    """

    host: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    ssh_options: tuple[str, ...] = ()
    remote_dir: str = ".kernelscope/sessions"
    remote_importer: str | None = None
    remote_importer_libs: str | None = None

    @property
    def is_local(self) -> bool:
        """True for this machine."""
        return self.host is None

    def ssh_target(self) -> Any:
        """The :class:`~engine.system.ssh.SshTarget` for a remote target."""
        from engine.system.ssh import SshTarget

        if self.host is None:
            raise SpecError("This session runs locally; it has no SSH target.")
        return SshTarget(
            host=self.host, user=self.user, port=self.port,
            identity_file=Path(self.identity_file) if self.identity_file else None,
            known_hosts=Path(self.known_hosts) if self.known_hosts else None,
            options=tuple(self.ssh_options),
        )


@dataclass(frozen=True)
class SessionSpec:
    """One session: run ``command`` (or a kernels/ ``workload``) under ``tool`` on ``target``.

    Attributes:
        tool: ``bench`` (run the program as is, timed, logs kept), ``nsys`` or ``ncu``.
        command: The program and its arguments (argv, not a shell string).
        cwd: The folder the program (and nsys/ncu around it) runs in, as nsys, ncu and torchrun do.
            Locally None means the caller's current directory (the runner writes it into the saved
            spec.json); on an SSH host None means the remote home, and a relative path is under it.
            Reports still go to the session folder.
        workload: A kernels/ workload name instead of ``command``.
        params: The workload's parameters (``--param k=v``).
        out_dir: Folder that receives one sub-folder per session.
        name: Report base name (default: the workload or the program's name).
        timeout_s: Kill the session after this many seconds (None: never).
        target: Local or SSH.
        nsys: Options when ``tool`` is nsys.
        ncu: Options when ``tool`` is ncu.
        tool_path: Explicit nsys/ncu executable (default: discovered locally; ``nsys``/``ncu`` on the
            remote PATH).
        env: Extra environment variables for the program.
        telemetry: Record GPU telemetry (NVML/GPM, absolute timestamps) to ``telemetry.csv`` in the
            session folder while the session runs (locally, or through the agent over ssh).
        telemetry_period_s: Seconds between telemetry samples.
        per_rank: ``command`` starts a distributed launcher (torchrun, srun, mpirun): put the
            profiler inside every rank, one report per rank (``<name>_rank<N>``); else one report
            around the whole command.
        profile_ranks: With ``per_rank``, profile only these ranks (``"0,3"``, ``"0-3"``; None: all).
    """

    tool: str = "bench"
    command: tuple[str, ...] = ()
    cwd: str | None = None
    workload: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    out_dir: str = "kernelscope-sessions"
    name: str | None = None
    timeout_s: float | None = 3600.0
    target: TargetSpec = field(default_factory=TargetSpec)
    nsys: NsysOptions = field(default_factory=NsysOptions)
    ncu: NcuOptions = field(default_factory=NcuOptions)
    tool_path: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    telemetry: bool = False
    telemetry_period_s: float = 0.1
    per_rank: bool = False
    profile_ranks: str | None = None

    def validate(self) -> SessionSpec:
        """Check the spec; return it.

        Raises:
            SpecError: with one sentence saying what to change.
        """
        if self.tool not in TOOLS:
            raise SpecError(f"Unknown tool {self.tool!r}; use one of {', '.join(TOOLS)}.")
        if not self.telemetry_period_s > 0:
            raise SpecError("The telemetry period must be more than 0 seconds, "
                            f"not {self.telemetry_period_s}.")
        if bool(self.command) == bool(self.workload):
            raise SpecError("Give either a command line (after --) or a workload name, not both or neither.")
        if self.params and not self.workload:
            raise SpecError("--param only applies to a kernels/ workload; put the program's own arguments "
                            "after --.")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise SpecError(f"The timeout must be positive (got {self.timeout_s}).")
        bad = [t for t in self.nsys.trace if t not in NSYS_TRACES]
        if self.tool == "nsys" and bad:
            raise SpecError(f"Unknown nsys trace {bad[0]!r}; use some of {', '.join(NSYS_TRACES)}.")
        for label, n in (("launch count", self.ncu.launch_count), ("launch skip", self.ncu.launch_skip)):
            if n is not None and n < 0:
                raise SpecError(f"The ncu {label} must be zero or more (got {n}).")
        if self.per_rank or self.profile_ranks:
            from engine.sessions.launchers import LauncherError, parse_ranks, split

            if self.tool == "bench" or not self.command:
                raise SpecError("--per-rank and --profile-ranks apply to nsys or ncu around a launcher "
                                "command (torchrun, srun, mpirun) given after --.")
            try:
                parse_ranks(self.profile_ranks)
                split(list(self.command))
            except LauncherError as exc:
                raise SpecError(str(exc)) from exc
        if self.ncu.clock_control not in ("none", "base"):
            raise SpecError(f"ncu clock control must be none or base (got {self.ncu.clock_control!r}).")
        return self

    @property
    def report_name(self) -> str:
        """The base name of the report files."""
        if self.name:
            base = self.name
        elif self.workload:
            base = self.workload
        else:
            base = Path(self.command[0]).name
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in base).strip("._") or "session"
        return safe[:60]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples become lists; None values kept)."""
        return json.loads(json.dumps(asdict(self)))  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionSpec:
        """Build a spec from :meth:`to_dict` output, a JSON file or a TOML table.

        Raises:
            SpecError: unknown keys or wrong types.
        """
        try:
            kw = _convert(cls, data)
            return cls(**kw).validate()
        except (TypeError, ValueError) as exc:
            raise SpecError(f"The session spec is not valid ({exc}).") from exc

    def save(self, path: Path) -> None:
        """Write the spec as JSON atomically (temp file + rename)."""
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> SessionSpec:
        """Read a spec from a ``.json`` or ``.toml`` file.

        Raises:
            SpecError: the file cannot be read or parsed.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"Could not read the session spec {path} ({exc.strerror}).") from exc
        except UnicodeDecodeError as exc:
            raise SpecError(
                f"The session spec {path} is not a text file (not UTF-8); give a .toml or .json spec."
            ) from exc
        try:
            if str(path).endswith(".toml"):
                try:
                    import tomllib
                except ImportError:  # Python 3.10
                    try:
                        import tomli as tomllib  # type: ignore[no-redef,import-not-found]
                    except ImportError as exc:
                        raise SpecError("Reading a TOML spec needs Python 3.11 or the tomli package "
                                        "(pip install tomli); or save the spec as JSON.") from exc
                data = tomllib.loads(text)
            else:
                data = json.loads(text)
        except ValueError as exc:
            raise SpecError(f"{path} is not valid {'TOML' if str(path).endswith('.toml') else 'JSON'} "
                            f"({exc}); fix it there.") from exc
        return cls.from_dict(data)

    def with_(self, **changes: Any) -> SessionSpec:
        """A copy with some fields changed."""
        return replace(self, **changes)


_NESTED: dict[str, type] = {"target": TargetSpec, "nsys": NsysOptions, "ncu": NcuOptions}


def _convert(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"expected a table for {cls.__name__}, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in {cls.__name__}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if cls is SessionSpec and key in _NESTED:
            out[key] = _NESTED[key](**_convert(_NESTED[key], value))
        elif isinstance(value, list):
            out[key] = tuple(str(v) for v in value)
        elif key in ("params", "env"):
            if not isinstance(value, dict):
                raise TypeError(f"{key} must be a table")
            out[key] = {str(k): str(v) for k, v in value.items()}
        else:
            out[key] = value
    return out
