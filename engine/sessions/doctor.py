"""``kernelscope doctor``: which profiling tools, compilers, Python packages and GPUs are here.

Each check is a :class:`Check` with a status and a sentence saying what an absence or problem means
and what to do. Everything is discovered from an environment mapping and a filesystem root so tests
can point it at fake installs; nothing here needs a GPU.
"""

from __future__ import annotations

import glob
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.system.tools import nsys_candidates, parse_version, tool_version

OK, MISSING, WARN = "ok", "missing", "warning"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report.

    Attributes:
        name: What was checked (``nsys``, ``ncu``, ``QdstrmImporter``, ``nvcc``, ``python``, ``torch``,
            ``driver``, ``gpu``, ``gpu counters``, ``perf events``).
        status: ``ok``, ``missing`` or ``warning``.
        version: Version found, if any.
        path: Where it was found, if anywhere.
        detail: One sentence: what it means and what to do.
    """

    name: str
    status: str
    version: str | None = None
    path: str | None = None
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _root(env: Mapping[str, str], root: str) -> str:
    return env.get("KERNELSCOPE_TOOL_ROOT", root).rstrip("/")


def find_ncu(env: Mapping[str, str] | None = None, root: str = "/") -> Path | None:
    """Find ncu in ``$NCU``, PATH, ``/opt/nvidia/nsight-compute/*`` or ``/usr/local/cuda*/bin``."""
    env = os.environ if env is None else env
    if env.get("NCU"):
        given = Path(env["NCU"])
        p = given / "ncu" if given.is_dir() else given
        if p.is_file() and os.access(p, os.X_OK):
            return p
    found = shutil.which("ncu", path=env.get("PATH", ""))
    if found:
        return Path(found)
    r = _root(env, root)
    for pattern in (f"{r}/opt/nvidia/nsight-compute/*/ncu", f"{r}/usr/local/cuda*/bin/ncu"):
        for hit in sorted(glob.glob(pattern), reverse=True):
            if os.access(hit, os.X_OK):
                return Path(hit)
    return None


def find_nvcc(env: Mapping[str, str] | None = None, root: str = "/") -> Path | None:
    """Find nvcc in PATH, ``$CUDA_HOME/bin`` or ``/usr/local/cuda*/bin``."""
    env = os.environ if env is None else env
    found = shutil.which("nvcc", path=env.get("PATH", ""))
    if found:
        return Path(found)
    r = _root(env, root)
    pats = [f"{env['CUDA_HOME']}/bin/nvcc"] if env.get("CUDA_HOME") else []
    for pattern in [*pats, f"{r}/usr/local/cuda/bin/nvcc", f"{r}/usr/local/cuda*/bin/nvcc"]:
        for p in sorted(glob.glob(pattern), reverse=True):
            if os.access(p, os.X_OK):
                return Path(p)
    return None


def qdstrm_importer_candidates(nsys: Path, env: Mapping[str, str] | None = None) -> list[Path]:
    """Where Nsight Systems' stand-alone importer may be, for a given nsys (existing files only).

    ``$KERNELSCOPE_IMPORTER`` first; then beside nsys's real location: the Nsight Systems layout
    (``<root>/target-linux-x64/nsys`` with ``<root>/host-linux-x64/QdstrmImporter``) and the copy inside
    Nsight Compute (``host/target-linux-x64/nsys`` with ``host/linux-desktop-*-x64/QdstrmImporter``).
    """
    env = os.environ if env is None else env
    out: list[Path] = []
    if env.get("KERNELSCOPE_IMPORTER"):
        out.append(Path(env["KERNELSCOPE_IMPORTER"]))
    real = Path(nsys).resolve()
    here = real.parent
    for pattern in ("QdstrmImporter", "../host-linux-*/QdstrmImporter", "../linux-desktop-*/QdstrmImporter",
                    "../*/QdstrmImporter", "../../host-linux-*/QdstrmImporter"):
        out += [Path(os.path.normpath(p)) for p in sorted(glob.glob(str(here / pattern)), reverse=True)]
    seen: list[Path] = []
    for p in out:
        if p.is_file() and os.access(p, os.X_OK) and p.resolve() not in [s.resolve() for s in seen]:
            seen.append(p)
    return seen


def find_qdstrm_importer(nsys: Path, env: Mapping[str, str] | None = None) -> Path | None:
    """The first QdstrmImporter for this nsys, or None."""
    cands = qdstrm_importer_candidates(nsys, env)
    return cands[0] if cands else None


def importer_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment for QdstrmImporter: ``$KERNELSCOPE_IMPORTER_LIBS`` prepended to LD_LIBRARY_PATH.

    Only the importer gets these libraries (they are Debian builds of libdw and friends, which could
    disagree with the profiled program's own).
    """
    out = dict(env)
    libs = env.get("KERNELSCOPE_IMPORTER_LIBS")
    if libs:
        out["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libs, env.get("LD_LIBRARY_PATH", "")) if p)
    return out


def _missing_libs(binary: Path, env: Mapping[str, str]) -> list[str]:
    """Shared libraries ``ldd`` cannot find for binary (empty when ldd is absent)."""
    ldd = shutil.which("ldd")
    if not ldd:
        return []
    try:
        out = subprocess.run([ldd, str(binary)], capture_output=True, text=True, timeout=20, check=False,
                             env=dict(env))
    except (OSError, subprocess.SubprocessError):
        return []
    return [ln.split()[0] for ln in out.stdout.splitlines() if "not found" in ln]


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def check_tools(env: Mapping[str, str] | None = None, root: str = "/") -> list[Check]:
    """nsys, QdstrmImporter, ncu and nvcc."""
    env = os.environ if env is None else env
    checks: list[Check] = []
    nsys_list = nsys_candidates(env, root)
    if nsys_list:
        nsys = nsys_list[0]
        ver = tool_version(nsys)
        inside_ncu = "nsight-compute" in str(nsys.resolve())
        where = " (the copy that ships inside Nsight Compute)." if inside_ncu else "."
        if parse_version(ver) < (2024,):
            checks.append(Check("nsys", WARN, ver, str(nsys), (
                f"This nsys ({ver or 'version unknown'}) is old: it cannot open reports written by newer "
                "versions and may capture only part of a run on a recent driver; install Nsight Systems "
                "2024 or newer, or set NSYS=/path/to/nsys.")))
        else:
            checks.append(Check("nsys", OK, ver, str(nsys),
                                "Nsight Systems is ready for `kernelscope run --tool nsys`" + where))
        imp = find_qdstrm_importer(nsys, env)
        if imp is None:
            checks.append(Check("QdstrmImporter", WARN, None, None, (
                "No stand-alone QdstrmImporter was found beside nsys; if nsys's own import step fails (it "
                "then leaves a .qdstrm), set KERNELSCOPE_IMPORTER to an importer's path.")))
        else:
            missing = _missing_libs(imp, importer_env(env))
            if missing:
                checks.append(Check("QdstrmImporter", WARN, None, str(imp), (
                    f"The importer lacks {', '.join(missing[:3])}; if nsys's import step fails Kernelscope "
                    "runs the importer itself, so set KERNELSCOPE_IMPORTER_LIBS to a folder with those "
                    "libraries.")))
            else:
                checks.append(Check("QdstrmImporter", OK, None, str(imp), (
                    "If nsys's import step fails and leaves a .qdstrm, Kernelscope runs this importer "
                    "itself.")))
    else:
        checks.append(Check("nsys", MISSING, None, None, (
            "Nsight Systems is not installed: timeline profiling (--tool nsys) and opening .nsys-rep files "
            "are unavailable (.sqlite exports still open); install it or set NSYS=/path/to/nsys.")))
    ncu = find_ncu(env, root)
    if ncu:
        checks.append(Check("ncu", OK, tool_version(ncu), str(ncu),
                            "Nsight Compute is ready for `kernelscope run --tool ncu`."))
    else:
        checks.append(Check("ncu", MISSING, None, None, (
            "Nsight Compute is not installed: kernel profiling (--tool ncu) is unavailable (.ncu-rep files "
            "still open); install it or set NCU=/path/to/ncu.")))
    nvcc = find_nvcc(env, root)
    if nvcc:
        checks.append(Check("nvcc", OK, _nvcc_version(nvcc), str(nvcc),
                            "The CUDA compiler can build the CUDA C++ workloads in kernels/."))
    else:
        checks.append(Check("nvcc", MISSING, None, None, (
            "The CUDA compiler is not installed: the CUDA C++ workloads in kernels/ cannot be built "
            "(the PyTorch ones still run); install the CUDA toolkit.")))
    return checks


def _nvcc_version(nvcc: Path) -> str | None:
    try:
        out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, timeout=30,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for part in out.split(","):
        if "release" in part:
            return part.replace("release", "").strip()
    return None


def check_python() -> list[Check]:
    """This Python and torch (read from package metadata: torch is not imported)."""
    checks = [Check("python", OK, platform.python_version(), sys.executable, "")]
    try:
        ver = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        checks.append(Check("torch", MISSING, None, None, (
            "PyTorch is not installed: the PyTorch workloads and `kernelscope bench` are unavailable; "
            "install a CUDA build of torch.")))
    else:
        cpu_only = "+cpu" in ver
        checks.append(Check("torch", WARN if cpu_only else OK, ver, None, (
            "This is a CPU-only build of PyTorch; install a CUDA build to run GPU workloads."
            if cpu_only else "PyTorch is installed for the PyTorch workloads.")))
    return checks


def check_gpus(lib: Any | None = None) -> list[Check]:
    """Driver and GPUs through NVML (never raises; no GPU is a finding, not an error)."""
    from engine.system.nvml import Nvml, load_pynvml, nvml_available

    lib = lib if lib is not None else load_pynvml()
    ok, sentence = nvml_available(lib)
    if not ok:
        from engine.system.nvml import UNAVAILABLE_HINT

        text = sentence.replace("Telemetry is unavailable: ", "No GPU can be used here: ")
        return [Check("driver", MISSING, None, None, text.replace(f", {UNAVAILABLE_HINT}", "."))]
    checks: list[Check] = []
    assert lib is not None  # nvml_available said yes
    lib.nvmlInit()
    try:
        nvml = Nvml(lib)
        driver = nvml.query("nvmlSystemGetDriverVersion")
        cuda = nvml.query("nvmlSystemGetCudaDriverVersion_v2") or nvml.query("nvmlSystemGetCudaDriverVersion")
        cuda_txt = f", CUDA {cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else ""
        checks.append(Check("driver", OK, f"{driver}{cuda_txt}", None, "The NVIDIA driver is loaded."))
        for i in range(int(nvml.query("nvmlDeviceGetCount", default=0) or 0)):
            h = nvml.query("nvmlDeviceGetHandleByIndex", i)
            name = nvml.query("nvmlDeviceGetName", h) if h is not None else None
            uuid = nvml.query("nvmlDeviceGetUUID", h) if h is not None else None
            mem = nvml.query("nvmlDeviceGetMemoryInfo", h) if h is not None else None
            cc = nvml.query("nvmlDeviceGetCudaComputeCapability", h) if h is not None else None
            bits = [b for b in (
                f"{getattr(mem, 'total', 0) / 2**30:.0f} GiB" if mem is not None else None,
                f"compute capability {cc[0]}.{cc[1]}" if isinstance(cc, tuple) else None,
                str(uuid) if uuid else None) if b]
            desc = f"{_text(name) or 'unknown GPU'}: {', '.join(bits)}."
            checks.append(Check(f"gpu {i}", OK, None, None, desc))
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down an NVML that is going away anyway
            pass
    return checks


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode() if isinstance(v, bytes) else str(v)


def check_permissions(proc_root: str = "/proc") -> list[Check]:
    """GPU counter access (RmProfilingAdminOnly) and perf events (perf_event_paranoid)."""
    checks: list[Check] = []
    params = _read(f"{proc_root}/driver/nvidia/params")
    if params is not None:
        admin_only = any(ln.replace(" ", "") == "RmProfilingAdminOnly:1" for ln in params.splitlines())
        if admin_only and os.geteuid() != 0:
            checks.append(Check("gpu counters", WARN, None, None, (
                "GPU performance counters are restricted to administrators, so ncu will stop with "
                "ERR_NVGPUCTRPERM; run ncu as root, or set NVreg_RestrictProfilingToAdminUsers=0 for the "
                "nvidia module and reboot.")))
        else:
            checks.append(Check("gpu counters", OK, None, None, (
                "ncu can read GPU performance counters" + (" (as root)." if admin_only else "."))))
    paranoid = _read(f"{proc_root}/sys/kernel/perf_event_paranoid")
    if paranoid is not None and paranoid.strip().lstrip("-").isdigit():
        level = int(paranoid.strip())
        if level > 2 and os.geteuid() != 0:
            checks.append(Check("perf events", WARN, str(level), None, (
                f"kernel.perf_event_paranoid is {level}, so nsys cannot sample CPUs; sessions use "
                "sample=none, or run `sudo sysctl kernel.perf_event_paranoid=2`.")))
        else:
            checks.append(Check("perf events", OK, str(level), None,
                                "nsys may sample CPUs (perf_event_paranoid allows it)."))
    return checks


def run_doctor(env: Mapping[str, str] | None = None, root: str = "/", nvml_lib: Any | None = None,
               proc_root: str = "/proc") -> list[Check]:
    """Every local check, in the order printed."""
    return [*check_tools(env, root), *check_python(), *check_gpus(nvml_lib), *check_permissions(proc_root)]


# -- remote --------------------------------------------------------------------------------------
REMOTE_PROBE = r"""
for t in nsys ncu nvcc python3 nvidia-smi; do
  p=$(command -v "$t" 2>/dev/null); echo "which $t=${p}"
done
for p in /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
  [ -x "$p" ] && echo "found nsys=$p"
done
for p in /opt/nvidia/nsight-compute/*/ncu; do [ -x "$p" ] && echo "found ncu=$p"; done
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=index,name,memory.total,driver_version \
  --format=csv,noheader 2>&1 | sed 's/^/gpu=/'
command -v python3 >/dev/null 2>&1 && python3 -c 'import importlib.metadata as m
try: print("torch=" + m.version("torch"))
except Exception: print("torch=")' 2>/dev/null
echo "paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
exit 0
"""


def parse_remote_probe(text: str) -> list[Check]:
    """Turn the remote probe's ``key=value`` lines into checks (pure; tested)."""
    which: dict[str, str] = {}
    found: dict[str, str] = {}
    gpus: list[str] = []
    torch: str | None = None
    paranoid: str | None = None
    for ln in text.splitlines():
        key, _, value = ln.partition("=")
        if key.startswith("which "):
            which[key[6:]] = value.strip()
        elif key.startswith("found "):
            found.setdefault(key[6:], value.strip())
        elif key == "gpu":
            gpus.append(value.strip())
        elif key == "torch":
            torch = value.strip() or None
        elif key == "paranoid":
            paranoid = value.strip() or None
    checks: list[Check] = []
    for tool, what in (("nsys", "Nsight Systems"), ("ncu", "Nsight Compute"), ("nvcc", "the CUDA compiler")):
        path = which.get(tool) or found.get(tool)
        if path:
            on_path = bool(which.get(tool))
            checks.append(Check(tool, OK if on_path else WARN, None, path, "" if on_path else (
                f"{tool} is not on the remote PATH; pass --tool-path {path} when running there.")))
        else:
            checks.append(Check(tool, MISSING, None, None, f"{what} is not installed on the remote host."))
    checks.append(Check("python", OK if which.get("python3") else MISSING, None, which.get("python3") or None,
                        "" if which.get("python3") else "python3 is not on the remote PATH."))
    checks.append(Check("torch", OK if torch else MISSING, torch, None,
                        "" if torch else "PyTorch is not installed for the remote python3."))
    if gpus and not any("NVIDIA-SMI has failed" in g or "failed" in g.lower() for g in gpus):
        checks += [Check(f"gpu {g.split(',')[0].strip()}", OK, None, None, g) for g in gpus]
    else:
        checks.append(Check("driver", MISSING, None, None, (
            "No NVIDIA GPU or driver answered on the remote host (nvidia-smi "
            + ("failed)." if gpus else "is not installed)."))))
    if paranoid is not None and paranoid.lstrip("-").isdigit() and int(paranoid) > 2:
        checks.append(Check("perf events", WARN, paranoid, None,
                            f"perf_event_paranoid is {paranoid} there; nsys CPU sampling is unavailable."))
    return checks


def run_remote_doctor(target: Any, timeout_s: float = 60.0) -> list[Check]:
    """The doctor's checks on an SSH host (needs only a POSIX shell there).

    Raises:
        SshError: the host could not be reached or trusted.
    """
    from engine.system.ssh import SshError, explain_ssh_failure, ssh_argv

    try:
        out = subprocess.run(ssh_argv(target, ["sh", "-c", REMOTE_PROBE]), stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise SshError(f"{target.display} did not answer within {timeout_s:.0f} s.") from exc
    except FileNotFoundError as exc:
        raise SshError("The ssh program was not found; install the OpenSSH client (openssh-client).") from exc
    if out.returncode != 0:
        raise SshError(explain_ssh_failure(target, out.returncode, out.stderr)
                       or f"The doctor's probe failed on {target.display} (exit {out.returncode}).")
    return parse_remote_probe(out.stdout)


def format_checks(checks: list[Check]) -> str:
    """The doctor's table for a terminal."""
    mark = {OK: "ok ", MISSING: "-- ", WARN: "!! "}
    lines = []
    for c in checks:
        head = f"{mark.get(c.status, '?? ')}{c.name:<15} {c.version or '':<16} {c.path or ''}".rstrip()
        lines.append(head)
        if c.detail:
            lines.append(f"{'':<19}{c.detail}")
    return "\n".join(lines)
