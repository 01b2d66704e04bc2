"""Plain-language explanations of Nsight Compute's own error lines (``==ERROR==``, ``==WARNING==``)."""

from __future__ import annotations

import re

_PERMISSION = (
    "ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run it as root or with "
    "CAP_SYS_ADMIN (e.g. `sudo ncu ...`, or `--cap-add=SYS_ADMIN` for a container), or let every user "
    "profile by setting the driver option NVreg_RestrictProfilingToAdminUsers=0 "
    "(`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d/, then reboot)."
)

#: (pattern, sentence), most specific first.
_KNOWN: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"ERR_NVGPUCTRPERM"), _PERMISSION),
    (re.compile(r"No kernels were profiled", re.I),
     "ncu profiled no kernel: the program launched none, or the --kernel-name/--kernel-id/--launch-skip "
     "filters matched none; check the filters and that the program reaches its GPU code."),
    (re.compile(r"(device|GPU)[^\n]*is not supported|Profiling is not supported on this device", re.I),
     "This version of ncu does not support the GPU; install the Nsight Compute that matches the "
     "GPU's architecture and the driver."),
    (re.compile(r"(Failed to|Unable to) (load|find)[^\n]*(libcuda|driver)", re.I),
     "ncu could not load the CUDA driver; check that the NVIDIA driver is installed and the GPU is "
     "visible (`nvidia-smi`)."),
    (re.compile(r"Failed to find metric|metric[^\n]*(not found|does not exist)", re.I),
     "ncu does not know one of the requested metrics on this GPU; drop it or use `--section`/`--set` "
     "names that this ncu version lists in `ncu --list-sections`."),
]


def explain_ncu_log(text: str) -> str | None:
    """One sentence that explains what went wrong in an ncu run, or None if nothing known did.

    Args:
        text: ncu's stdout/stderr (or a part of it).

    Returns:
        The explanation with its fix, or None when the log shows none of the known problems.
    """
    for pattern, sentence in _KNOWN:
        if pattern.search(text):
            return sentence
    return None
