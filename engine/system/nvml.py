"""The one wrapper around NVML (``pynvml`` from the ``nvidia-ml-py`` package).

Every NVML call in Kernelscope goes through :meth:`Nvml.query`, which returns ``None`` (NA) when the
function, the metric or the GPU does not support it or fails, and never raises (nvitop's
``nvmlQuery`` pattern). Failures that mean the GPU or driver went away are remembered in
:attr:`Nvml.fatal` so the sampler can mark a gap instead of reporting silent NAs.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType
from typing import Any

UNAVAILABLE_HINT = "or replay a recording with --replay FILE."

# NVML return codes (nvml.h) that mean "the GPU or the driver is gone", not "metric not supported".
_FATAL_CODES = {
    1: "NVML is not initialized",  # NVML_ERROR_UNINITIALIZED
    9: "the NVIDIA driver is not loaded",  # NVML_ERROR_DRIVER_NOT_LOADED
    12: "libnvidia-ml.so.1 was not found",  # NVML_ERROR_LIBRARY_NOT_FOUND
    15: "the GPU is lost (fell off the bus)",  # NVML_ERROR_GPU_IS_LOST
    18: "the NVIDIA kernel module and libnvidia-ml versions differ",  # NVML_ERROR_LIB_RM_VERSION_MISMATCH
    20: "the GPU needs a reset",  # NVML_ERROR_RESET_REQUIRED
}


def load_pynvml() -> ModuleType | None:
    """The ``pynvml`` module, or None if ``nvidia-ml-py`` is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        return None


class Nvml:
    """A thin, never-raising view of the NVML library.

    Args:
        lib: The ``pynvml`` module, or a stand-in with the same names (tests use one, since a GPU
            cannot exist on a test machine). None loads ``pynvml``.
    """

    def __init__(self, lib: ModuleType | Any | None = None) -> None:
        self.lib: Any = lib if lib is not None else load_pynvml()
        self._lock = threading.Lock()
        self.fatal: str | None = None  # set when a call failed because the GPU/driver went away
        self.last_error: str | None = None

    def query(self, func: str, *args: Any, default: Any = None) -> Any:
        """Call NVML function ``func`` (a pynvml name such as ``"nvmlDeviceGetPowerUsage"``).

        Returns:
            The function's result, or ``default`` (None = NA) when the function is missing from this
            pynvml or driver, the metric or GPU does not support it, permission is refused, or the
            GPU is lost. Never raises.
        """
        lib = self.lib
        if lib is None:
            return default
        fn = getattr(lib, func, None)
        if fn is None:
            self.last_error = f"{func} is not in this nvidia-ml-py"
            return default
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - NVMLError_* and ctypes/OS errors all mean NA
            code = getattr(exc, "value", None)
            self.last_error = f"{func}: {exc}"
            if isinstance(code, int) and code in _FATAL_CODES:
                self.fatal = _FATAL_CODES[code]
            return default

    def take_fatal(self) -> str | None:
        """The fatal reason seen since the last call (and clear it)."""
        reason, self.fatal = self.fatal, None
        return reason

    def const(self, name: str, default: Any = None) -> Any:
        """A pynvml constant by name, or ``default`` if this pynvml lacks it."""
        return getattr(self.lib, name, default) if self.lib is not None else default


def _error_code(exc: BaseException) -> int | None:
    code = getattr(exc, "value", None)
    return code if isinstance(code, int) else None


def nvml_available(lib: ModuleType | Any | None = None) -> tuple[bool, str]:
    """Whether live telemetry can run here.

    Args:
        lib: The ``pynvml`` module or a stand-in; None loads ``pynvml``.

    Returns:
        ``(True, "NVML ready: driver 580.x, 1 GPU.")`` or ``(False, sentence)`` where the sentence
        says what is missing and what to do. Never raises.
    """
    lib = lib if lib is not None else load_pynvml()
    if lib is None:
        return False, (
            "Telemetry is unavailable: the nvidia-ml-py package is not installed. "
            f"Install it with `pip install nvidia-ml-py`, {UNAVAILABLE_HINT}"
        )
    try:
        lib.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - turned into a sentence
        return False, init_failure_sentence(exc)
    try:
        nvml = Nvml(lib)
        count = nvml.query("nvmlDeviceGetCount")
        driver = nvml.query("nvmlSystemGetDriverVersion")
        if not count:
            return False, (
                "Telemetry is unavailable: the NVIDIA driver is loaded but reports no GPU. "
                f"Check that `nvidia-smi` lists one, {UNAVAILABLE_HINT}"
            )
        return True, f"NVML ready: driver {driver or 'unknown'}, {count} GPU{'s' if count != 1 else ''}."
    finally:
        try:
            lib.nvmlShutdown()
        except Exception:  # noqa: BLE001, S110 - shutting down an NVML that is going away anyway
            pass


def init_failure_sentence(exc: BaseException) -> str:
    """The one sentence for an ``nvmlInit`` failure (by its NVML error code)."""
    code = _error_code(exc)
    if code == 12:  # LIBRARY_NOT_FOUND
        what = "no NVIDIA driver (libnvidia-ml.so.1 not found). Install the NVIDIA driver"
    elif code == 9:  # DRIVER_NOT_LOADED
        what = (
            "the NVIDIA driver is not loaded (libnvidia-ml.so.1 is installed, but no GPU driver is "
            "running; `nvidia-smi` should work first). Load the driver or use a machine with a GPU"
        )
    elif code == 4:  # NO_PERMISSION
        what = (
            "no permission to open the GPU (NVML refused access). Run as a user in the video group "
            "or ask an administrator for access"
        )
    elif code == 18:  # LIB_RM_VERSION_MISMATCH
        what = (
            "the NVIDIA kernel module and libnvidia-ml.so.1 versions differ (driver updated without "
            "a reboot). Reboot or reload the driver"
        )
    else:
        what = f"NVML could not start ({exc}). Check that `nvidia-smi` works"
    return f"Telemetry is unavailable: {what}, {UNAVAILABLE_HINT}"
