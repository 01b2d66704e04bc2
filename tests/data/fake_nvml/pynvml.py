"""A stand-in for ``pynvml`` (nvidia-ml-py) on machines without a GPU: tests and the local benchmark.

Put this folder first on ``sys.path`` / ``PYTHONPATH`` and ``import pynvml`` gets it. Constants,
structs and ``NVMLError`` come from the real nvidia-ml-py; the device functions answer with the
values of the real H200 recording (``shared/fixtures/telemetry/telemetry_h200.csv``), one row per
``nvmlDeviceGetUtilizationRates`` call, cycling. Functions not defined here raise
``NVMLError(NOT_SUPPORTED)`` as NVML does for a metric a GPU lacks.

Environment:
    FAKE_NVML_GPUS: number of GPUs (default 1); GPU i reports the recording shifted by 10*i rows.
    FAKE_NVML_NO_DRIVER: if set, nvmlInit fails with NVML_ERROR_LIBRARY_NOT_FOUND.
    FAKE_NVML_COSTS: ``name=cpu_us[:sleep_us],...`` cost per call. The default models the two costs
        measured on the H200 (driver 580.159.04): nvmlDeviceGetTotalEnergyConsumption 3.5 ms of CPU,
        nvmlDeviceGetPcieThroughput 20 ms blocked (NVML measures over 20 ms). Others are free.
    FAKE_NVML_RECORDING: another recording in the fixture format.
"""

from __future__ import annotations

import csv
import importlib.util as _ilu
import os
import sys as _sys
import time
from pathlib import Path
from typing import Any

# Load the real nvidia-ml-py under another name (this module shadows it on sys.path).
_real_path = None
for _p in _sys.path:
    _cand = Path(_p or ".") / "pynvml.py"
    if _cand.is_file() and _cand.resolve() != Path(__file__).resolve():
        _real_path = _cand
        break
if _real_path is None:  # pragma: no cover
    raise ImportError("the stand-in pynvml needs the real nvidia-ml-py installed beside it")
_spec = _ilu.spec_from_file_location("_real_pynvml", _real_path)
assert _spec is not None and _spec.loader is not None
_real = _ilu.module_from_spec(_spec)
_sys.modules["_real_pynvml"] = _real
_spec.loader.exec_module(_real)

NVMLError = _real.NVMLError
FAKE = True

_HERE = Path(__file__).resolve()
_SHARED = Path(os.environ.get("KERNELSCOPE_SHARED", _HERE.parents[4] / "shared"))
_DEFAULT_REC = _SHARED / "fixtures" / "telemetry" / "telemetry_h200.csv"
_DEFAULT_COSTS = "nvmlDeviceGetTotalEnergyConsumption=3500,nvmlDeviceGetPcieThroughput=0:20000"


def _load_rows() -> list[dict[str, float]]:
    path = Path(os.environ.get("FAKE_NVML_RECORDING", str(_DEFAULT_REC)))
    if not path.is_file():
        # Without the fixtures: one idle-looking row, so the stand-in still works.
        return [{"util_gpu": 0.0, "util_mem": 0.0, "mem_used_mb": 615.0, "sm_mhz": 1980.0, "mem_mhz": 3201.0,
                 "power_w": 133.7, "temp_c": 39.0, "pcie_tx_kbs": 1035.0, "pcie_rx_kbs": 451.0}]
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row = {}
            for k, v in r.items():
                try:
                    row[k] = float(v)
                except (TypeError, ValueError):
                    row[k] = float("nan")
            out.append(row)
    return out


def _parse_costs(text: str) -> dict[str, tuple[float, float]]:
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, spec = part.partition("=")
        cpu, _, sleep = spec.partition(":")
        out[name] = (float(cpu or 0) / 1e6, float(sleep or 0) / 1e6)
    return out


ROWS = _load_rows()
COSTS = _parse_costs(os.environ.get("FAKE_NVML_COSTS", _DEFAULT_COSTS))
CALLS: dict[str, int] = {}
_state = {"inits": 0, "tick": [0] * 64}


def _cost(name: str) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1
    c = COSTS.get(name)
    if c is None:
        return
    cpu, sleep = c
    if cpu:
        end = time.thread_time() + cpu
        while time.thread_time() < end:  # burn CPU like an ioctl would
            pass
    if sleep:
        time.sleep(sleep)


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


def _row(h: _Handle) -> dict[str, float]:
    return ROWS[(_state["tick"][h.index] + 10 * h.index) % len(ROWS)]


def _check(h: Any) -> _Handle:
    if _state["inits"] <= 0:
        raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
    if not isinstance(h, _Handle):
        raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
    return h


def nvmlInit() -> None:
    _cost("nvmlInit")
    if os.environ.get("FAKE_NVML_NO_DRIVER"):
        raise NVMLError(_real.NVML_ERROR_LIBRARY_NOT_FOUND)
    _state["inits"] += 1


def nvmlShutdown() -> None:
    _state["inits"] -= 1


def nvmlSystemGetDriverVersion() -> str:
    return "580.159.04"


def nvmlDeviceGetCount() -> int:
    if _state["inits"] <= 0:
        raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
    return int(os.environ.get("FAKE_NVML_GPUS", "1"))


def nvmlDeviceGetHandleByIndex(i: int) -> _Handle:
    if not 0 <= i < nvmlDeviceGetCount():
        raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(i)


def nvmlDeviceGetName(h: Any) -> str:
    _check(h)
    return "NVIDIA H200 (stand-in)"


def nvmlDeviceGetUUID(h: Any) -> str:
    return f"GPU-fake-{_check(h).index:04d}"


def nvmlDeviceGetUtilizationRates(h: Any) -> Any:
    h = _check(h)
    _cost("nvmlDeviceGetUtilizationRates")
    _state["tick"][h.index] += 1
    r = _row(h)
    return _real.c_nvmlUtilization_t(gpu=int(r["util_gpu"]), memory=int(r["util_mem"]))


def nvmlDeviceGetMemoryInfo(h: Any, version: Any = None) -> Any:
    r = _row(_check(h))
    _cost("nvmlDeviceGetMemoryInfo")
    total = 143771 * 2**20
    used = int(r["mem_used_mb"]) * 2**20
    return _real.c_nvmlMemory_t(total=total, free=total - used, used=used)


def nvmlDeviceGetClockInfo(h: Any, kind: int) -> int:
    r = _row(_check(h))
    _cost("nvmlDeviceGetClockInfo")
    return int(r["sm_mhz"] if kind == _real.NVML_CLOCK_SM else r["mem_mhz"])


def nvmlDeviceGetPowerUsage(h: Any) -> int:
    r = _row(_check(h))
    _cost("nvmlDeviceGetPowerUsage")
    return round(r["power_w"] * 1000)


def nvmlDeviceGetEnforcedPowerLimit(h: Any) -> int:
    _check(h)
    _cost("nvmlDeviceGetEnforcedPowerLimit")
    return 700_000


def nvmlDeviceGetTotalEnergyConsumption(h: Any) -> int:
    h = _check(h)
    _cost("nvmlDeviceGetTotalEnergyConsumption")
    return 1_000_000_000 + 133_700 * _state["tick"][h.index] // 10


def nvmlDeviceGetTemperature(h: Any, sensor: int) -> int:
    r = _row(_check(h))
    _cost("nvmlDeviceGetTemperature")
    return int(r["temp_c"])


def nvmlDeviceGetPcieThroughput(h: Any, counter: int) -> int:
    r = _row(_check(h))
    _cost("nvmlDeviceGetPcieThroughput")
    return int(r["pcie_tx_kbs"] if counter == _real.NVML_PCIE_UTIL_TX_BYTES else r["pcie_rx_kbs"])


def nvmlDeviceGetCurrentClocksEventReasons(h: Any) -> int:
    r = _row(_check(h))
    _cost("nvmlDeviceGetCurrentClocksEventReasons")
    return int(_real.nvmlClocksEventReasonGpuIdle if r["util_gpu"] == 0 else 0)


def nvmlDeviceGetTotalEccErrors(h: Any, kind: int, counter: int) -> int:
    _check(h)
    _cost("nvmlDeviceGetTotalEccErrors")
    return 0


def nvmlDeviceGetComputeRunningProcesses(h: Any) -> list[Any]:
    r = _row(_check(h))
    _cost("nvmlDeviceGetComputeRunningProcesses")
    if r["util_gpu"] == 0:
        return []
    return [_real.c_nvmlProcessInfo_t(pid=4242, usedGpuMemory=int(r["mem_used_mb"]) * 2**20)]


def nvmlDeviceGetGraphicsRunningProcesses(h: Any) -> list[Any]:
    _check(h)
    return []


def nvmlSystemGetProcessName(pid: int) -> str:
    return "python3"


# -- GPM -------------------------------------------------------------------------------------------
_GPM_COLUMNS = {
    _real.NVML_GPM_METRIC_SM_OCCUPANCY: "gpm_sm_occupancy",
    _real.NVML_GPM_METRIC_SM_UTIL: "gpm_sm_util",
    _real.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "gpm_any_tensor_util",
    _real.NVML_GPM_METRIC_DRAM_BW_UTIL: "gpm_dram_bw_util",
    _real.NVML_GPM_METRIC_GRAPHICS_UTIL: "gpm_graphics_util",
}


class _GpmSample:
    def __init__(self) -> None:
        self.row: dict[str, float] | None = None
        self.t = 0.0


def nvmlGpmQueryDeviceSupport(h: Any) -> Any:
    _check(h)
    s = _real.c_nvmlGpmSupport_t()
    s.isSupportedDevice = 1
    return s


def nvmlGpmSampleAlloc() -> _GpmSample:
    return _GpmSample()


def nvmlGpmSampleFree(s: _GpmSample) -> None:
    pass


def nvmlGpmSampleGet(h: Any, s: _GpmSample) -> _GpmSample:
    h = _check(h)
    _cost("nvmlGpmSampleGet")
    s.row, s.t = _row(h), time.monotonic()
    return s


_GPM_REFS: list[Any] = []


def nvmlGpmMetricsGet(mg: Any) -> Any:
    _cost("nvmlGpmMetricsGet")
    s2 = _GPM_LAST.get("s2")
    row = s2.row if s2 is not None and s2.row is not None else ROWS[0]
    for i in range(mg.numMetrics):
        m = mg.metrics[i]
        col = _GPM_COLUMNS.get(m.metricId)
        v = row.get(col, float("nan")) if col else float("nan")
        if col is None or v != v:
            m.nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
            m.value = 0.0
        else:
            m.nvmlReturn = 0
            m.value = v
    return mg


_GPM_LAST: dict[str, _GpmSample | None] = {"s2": None}


class c_nvmlGpmMetricsGet_t(_real.c_nvmlGpmMetricsGet_t):  # noqa: N801 - pynvml's name
    """The real struct; remembers the Python sample objects (the real one holds C pointers)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("sample1", "sample2") and isinstance(value, _GpmSample):
            if name == "sample2":
                _GPM_LAST["s2"] = value
            return
        super().__setattr__(name, value)


def __getattr__(name: str) -> Any:
    if name.startswith("nvml") and not name.startswith(("nvmlClocks",)):
        def unsupported(*args: Any, **kwargs: Any) -> Any:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)

        unsupported.__name__ = name
        return unsupported
    return getattr(_real, name)


def __dir__() -> list[str]:
    return sorted(set(dir(_real)) | set(globals()))
