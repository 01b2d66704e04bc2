"""Findings from an Nsight Compute report (``.ncu-rep`` or its ``--page raw`` CSV export).

Kernels with the same name are grouped; metrics are their mean over the profiled launches, and a
gain is computed over the kernels' summed duration. Every metric may be missing (other chips, other
sections collected): a rule whose metrics are absent says nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.findings.model import Evidence, Finding, Gain, fmt_time, pct
from engine.reports.ncu import SCALAR, SMSP_HZ, SMSP_INST

if TYPE_CHECKING:

    from engine.reports.ncu import NcuReport

#: the evidence label of ncu's own estimate before our cap (the fix list ranks ties by it)
UNCAPPED = "ncu's estimate, uncapped"

MATMUL_LIKE = re.compile(r"gemm|matmul|mma|sdpa|attention|flash|fmha|xmma|nvjet|cutlass|cublas|conv",
                         re.IGNORECASE)
FP32_GEMM = re.compile(r"sm\d+_xmma_gemm_f32|sgemm|gemm\w*_f32f32|_tf32_disabled|gemm_f32", re.IGNORECASE)

SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
GMMA = "smsp__sass_inst_executed_op_shared_gmma.sum"
TMA = "smsp__sass_inst_executed_op_tma_ld.sum"
ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps per SM": "launch__occupancy_limit_warps",
    "blocks per SM": "launch__occupancy_limit_blocks",
    "barriers": "launch__occupancy_limit_barriers",
}
LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
LD_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
ST_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
ST_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
SHARED_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
SPILLS = "sass__inst_executed_register_spilling"
LOCAL_SPILL_REQ = "derived__local_spilling_requests"

#: Thresholds (percent unless named): documented so users can tell why a rule fired.
LATENCY_SOL_PCT = 60.0  # ncu's SOLBottleneck uses 60 % of peak as the latency line
TENSOR_TARGET_PCT = 80.0
LOW_ACHIEVED_OCC_PCT = 30.0
SECTORS_PER_REQUEST_IDEAL = 4.0  # 32 threads x 4 bytes = 128 bytes = 4 sectors
SECTOR_BYTES = 32.0
UNCOALESCED_EXCESS = 0.5  # flag accesses that leave half or more of each sector unused
BANK_CONFLICT_SHARE_PCT = 10.0

_SRC = "ncu --page raw"


@dataclass
class KernelGroup:
    """Profiled launches of one kernel name."""

    name: str
    launches: int
    duration_ns: float  # summed over launches
    cc: str
    metrics: dict[str, float]
    first_id: int | None = None
    ids: list[int] = field(default_factory=list)  # the launches' IDs, in report order
    verdict: Any = None  # engine.analysis.ncu.verdict.Verdict of the first launch
    stalls: list[tuple[str, float]] = field(default_factory=list)
    device: str = ""  # the GPU's name as the report carries it ("NVIDIA H100 80GB HBM3")
    ncu_rules: dict[str, float] = field(default_factory=dict)  # ncu rule -> its estimated speedup (%)

    def m(self, name: str) -> float | None:
        """Mean value of a metric over the launches, None when not collected."""
        return self.metrics.get(name)


def parse_rule_args(text: object) -> float | None:
    """A number as ncu prints it in a rule or metric text ("3.568", "3,568", "40%"); None for n/a."""
    from engine.reports.ncu import parse_number

    if text is None:
        return None
    s = str(text).strip()
    if not s or s in ("n/a", "no data", "nan"):
        return None
    try:
        v = float(s)  # plain numbers first: "3.568" is not 3,568
    except ValueError:
        try:
            v = parse_number(s)
        except (ValueError, TypeError):
            return None
    return None if np.isnan(v) else float(v)


LD_BYTES_PER_SECTOR = "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"
ST_BYTES_PER_SECTOR = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"
GRID = "launch__grid_size"
SM_COUNT = "launch__sm_count"
SM_COUNT_ATTR = "device__attribute_multiprocessor_count"
WAVES = "launch__waves_per_multiprocessor"
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
DRAM_RATE = "dram__bytes.sum.per_second"
FP32_OPS = [SMSP_INST.format(op) for op, _f in SCALAR["FP32"][0]]

_WANTED = [SOL, MEM, TENSOR, GMMA, TMA, ACHIEVED, THEORETICAL, *LIMITS.values(), LD_SECTORS, LD_REQ,
           ST_SECTORS, ST_REQ, BANK_CONFLICTS, SHARED_WAVEFRONTS, SPILLS, LOCAL_SPILL_REQ,
           "launch__registers_per_thread", "launch__block_size", GRID, SM_COUNT, SM_COUNT_ATTR, WAVES,
           DRAM_READ, DRAM_WRITE, DRAM_RATE, SMSP_HZ, *FP32_OPS, LD_BYTES_PER_SECTOR, ST_BYTES_PER_SECTOR]


def kernel_groups(report: NcuReport) -> list[KernelGroup]:
    """Group the report's kernels by name with mean metrics (longest total duration first)."""
    k = report.kernels
    out: list[KernelGroup] = []
    if not len(k):
        return out
    name_col = "Base Name" if "Base Name" in k else "Kernel Name"
    for name, g in k.groupby(name_col, sort=False):
        kids = [int(x) for x in g["ID"]]
        metrics: dict[str, float] = {}
        for col in _WANTED:
            vals = [v for v in (report.value(kid, col) for kid in kids) if v is not None]
            if vals:
                metrics[col] = float(np.mean(vals))
        dur = float(g["duration_ns"].fillna(0).sum())
        kg = KernelGroup(str(name), len(g), dur, str(g["CC"].iloc[0]), metrics)
        if "Device Name" in g:
            kg.device = str(g["Device Name"].iloc[0] or "")
        if not kg.device and "device__attribute_display_name" in getattr(report.raw, "columns", ()):
            raw = report.raw
            names = raw.loc[raw["ID"].astype(str) == str(kids[0]), "device__attribute_display_name"]
            kg.device = str(names.iloc[0]) if len(names) else ""
        kg.first_id = kids[0]
        kg.ids = kids
        kg.verdict, kg.stalls = _verdict_and_stalls(report, kg.first_id)
        kg.ncu_rules = _rule_estimates(report, kg.first_id)
        out.append(kg)
    out.sort(key=lambda kg: -kg.duration_ns)
    return out


def _rule_estimates(report: NcuReport, kid: int) -> dict[str, float]:
    """Ncu's own rule results of one launch that carry an estimated speedup: rule -> percent."""
    rules = report.rules
    if rules is None or not len(rules):
        return {}
    mine = rules[(rules["ID"].astype(str) == str(kid)) & rules["speedup_pct"].notna()]
    out: dict[str, float] = {}
    for rule, sp in zip(mine["rule"], mine["speedup_pct"], strict=True):
        out[str(rule)] = max(out.get(str(rule), 0.0), float(sp))
    return out


def roofline_distance_pct(kg: KernelGroup) -> float | None:
    """How far the kernel is from its nearest roof: 100 − the busier of SM and memory throughput.

    A kernel at 91 % of DRAM peak can get at most ~9 % faster while it moves the same bytes, so an
    estimate for a fix that keeps the work is capped by this distance.
    """
    sm, mem = kg.m(SOL), kg.m(MEM)
    if sm is None and mem is None:
        return None
    return max(0.0, 100.0 - max(x for x in (sm, mem) if x is not None))


def _or_na(v: float | None) -> float | str:
    return "n/a" if v is None else v


def _verdict_and_stalls(report: NcuReport, kid: int) -> tuple[Any, list[tuple[str, float]]]:
    """The bottleneck verdict (engine.analysis.ncu.verdict) and top stalls of one launch."""
    try:
        from engine.analysis.ncu.verdict import kernel_metrics, verdict
        from engine.reports.ncu import top_stalls

        return verdict(kernel_metrics(report, kid)), top_stalls(report, kid, 3)
    except Exception:  # noqa: BLE001 - a verdict is extra evidence; rules still run without it
        return None, []


def _gain(kg: KernelGroup, saved_ns: float, formula: str, kind: str = "upper bound") -> Gain:
    saved_ns = min(max(saved_ns, 0.0), kg.duration_ns)  # never more than the kernel's own time
    return Gain(round(saved_ns / 1e9, 12), pct(saved_ns, kg.duration_ns), formula + " (percent: of this "
                "kernel's profiled time; ncu replays kernels, so there is no wall time)", kind,
                window="kernel time", window_ns=int(kg.duration_ns))


def _base(kg: KernelGroup, fid: str, title: str, severity: str, summary: str, ev: list[Evidence],
          **kw: object) -> Finding:
    ev = [Evidence("profiled launches", kg.launches, "launches", "ncu kernels"),
          Evidence("duration (sum)", kg.duration_ns, "ns", "gpu__time_duration.sum"), *ev]
    return Finding(id=fid, title=title, severity=severity, source="ncu", summary=summary, evidence=ev,
                   subject=kg.name, **kw)  # type: ignore[arg-type]


def rule_latency_bound(kg: KernelGroup) -> list[Finding]:
    """Low speed-of-light on both compute and memory."""
    sm, mem = kg.m(SOL), kg.m(MEM)
    if sm is None or mem is None or max(sm, mem) >= LATENCY_SOL_PCT:
        return []
    if kg.verdict is not None and kg.verdict.kind != "latency-bound":
        return []  # e.g. launch-bound (too small or too short): see rule_launch_bound_kernel
    busiest = max(sm, mem)
    at_line = kg.duration_ns * busiest / LATENCY_SOL_PCT
    ev = [Evidence("compute (SM) throughput", sm, "%", SOL), Evidence("memory throughput", mem, "%", MEM)]
    for reason, cyc in kg.stalls:
        ev.append(Evidence(f"warp stall: {reason}", round(cyc, 3), "cycles/inst",
                           f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"))
    why = kg.verdict.reason if kg.verdict is not None else (
        f"both under {LATENCY_SOL_PCT:.0f} %, so warps mostly wait (dependencies, barriers, too few "
        "warps).")
    return [_base(
        kg, "ncu.latency-bound", "Latency-bound: neither compute nor memory is busy", "warning",
        f"{kg.name}: {why}",
        ev,
        fix="Expose more parallelism: more warps per SM (see the occupancy finding), more independent "
            "work per thread (ILP), fewer barriers; check the Warp State stall reasons.",
        fix_cuda=("#pragma unroll 4\n"
                  "for (int k = 0; k < K; k += 4) { acc0 += a[k]*b[k]; acc1 += a[k+1]*b[k+1]; }"),
        fix_torch="# larger batches / fused kernels (torch.compile) give each launch more parallel work",
        gain=_gain(kg, kg.duration_ns - at_line,
                   f"duration × (1 − busiest unit / {LATENCY_SOL_PCT:.0f} %) = {fmt_time(kg.duration_ns)} × "
                   f"(1 − {busiest:.1f}/{LATENCY_SOL_PCT:.0f}) = {fmt_time(kg.duration_ns - at_line)} if "
                   "the busier unit reached ncu's latency line"),
        verify="Re-profile with ncu: compute or memory throughput above 60 % of peak.",
    )]


def rule_tensor_pipes(kg: KernelGroup) -> list[Finding]:
    """A matmul-like kernel whose tensor pipes are mostly idle."""
    t = kg.m(TENSOR)
    if t is None or not MATMUL_LIKE.search(kg.name) or t >= TENSOR_TARGET_PCT:
        return []
    target_ns = kg.duration_ns * t / TENSOR_TARGET_PCT
    ev = [Evidence("tensor pipe active", t, "%", TENSOR)]
    if kg.m(GMMA) is not None:
        ev.append(Evidence("wgmma instructions", kg.m(GMMA) or 0.0, "inst", GMMA))
    return [_base(
        kg, "ncu.tensor-pipes-idle", "Tensor pipes mostly idle in a matmul-like kernel",
        "warning" if t < 50 else "info",
        f"{kg.name} keeps its tensor pipes active only {t:.1f} % of active cycles (target "
        f"{TENSOR_TARGET_PCT:.0f} %): the math units wait for data or for warps.",
        ev,
        fix="Feed the tensor cores: larger tiles, more pipeline stages (TMA + mbarrier), enough "
            "warps; use a cuBLASLt/CUTLASS/cuDNN kernel tuned for this shape.",
        fix_cuda="// CUTLASS 3.x sm90 kernel: TMA loads + wgmma, warp-specialized, 3-4 stages\n"
                 "using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;",
        fix_torch=("torch.backends.cuda.matmul.allow_tf32 = True\n"
                   "model = torch.compile(model, mode='max-autotune')"),
        gain=Gain(None, None, "see ncu.fp32-gemm-on-hopper: an FP32 SIMT GEMM cannot use the "
                  "tensor pipes at all") if FP32_GEMM.search(kg.name) else _gain(
            kg, kg.duration_ns - target_ns,
            f"duration × (1 − tensor active / {TENSOR_TARGET_PCT:.0f} %) = {fmt_time(kg.duration_ns)} × "
            f"(1 − {t:.1f}/{TENSOR_TARGET_PCT:.0f}) if the tensor pipes were the limit"),
        verify="Re-profile: sm__pipe_tensor_cycles_active rises toward the target and the kernel is shorter.",
    )]


@dataclass(frozen=True)
class TensorRates:
    """The tensor-core and memory rates of the report's GPU that the FP32-GEMM gain uses."""

    gpu: str  # the GPU as the report names it
    tf32_flop_per_s: float
    bf16_flop_per_s: float | None
    fp32_flop_per_s: float | None
    dram_bytes_per_s: float | None
    source: str  # "calibration of <name> (<date>)" or "datasheet <key> (resources/gpu_specs.toml)"


def tensor_rates(device: str) -> TensorRates | None:
    """TF32/BF16 rates of the GPU called ``device`` (as the report names it).

    This machine's calibration when it is of that GPU (``kernelscope calibrate`` measures real
    matmul rates), else the datasheet entry that matches the name; None for an unknown GPU.
    """
    from engine.analysis.bandwidth import gpu_spec

    spec = gpu_spec(device)
    try:
        from engine.system.calibration import load_calibration

        cal = load_calibration()
    except Exception:  # noqa: BLE001 - no NVML, no store, a damaged file: fall back to the datasheet
        cal = None
    if cal is not None and cal.tf32_flop_per_s and device and (
            cal.gpu_name.lower() == device.lower() or (spec is not None and gpu_spec(cal.gpu_name) == spec)):
        return TensorRates(device, cal.tf32_flop_per_s, cal.bf16_flop_per_s, cal.fp32_flop_per_s,
                           cal.dram_bytes_per_s, f"calibration of {cal.gpu_name} ({cal.measured_at})")
    if spec is None or "tf32_tensor" not in spec.flop_per_s:
        return None
    return TensorRates(device, spec.flop_per_s["tf32_tensor"], spec.flop_per_s.get("bf16_tensor"),
                       spec.flop_per_s.get("fp32"), spec.hbm_bytes_per_s,
                       f"datasheet {spec.key} (resources/gpu_specs.toml)")


def _fp32_flop_per_s(kg: KernelGroup) -> float | None:
    """Achieved FP32 FLOP/s as ncu's roofline computes it: (fadd + fmul + 2·ffma) × SMSP clock."""
    hz = kg.m(SMSP_HZ)
    per_cycle = [kg.m(m) for m in FP32_OPS]
    if hz is None or any(x is None for x in per_cycle):
        return None
    return hz * sum(f * float(x) for (_op, f), x in zip(SCALAR["FP32"][0], per_cycle, strict=True)
                    if x is not None)


def _fp32_gemm_gain(kg: KernelGroup, rates: TensorRates | None) -> Gain:
    if rates is None:
        return Gain(None, None, f"no TF32 rate known for {kg.device or 'this GPU'}: add it to "
                    "resources/gpu_specs.toml or run `kernelscope calibrate` on it")
    per_launch_ns = kg.duration_ns / max(kg.launches, 1)
    flops = _fp32_flop_per_s(kg)
    rate = f"{rates.tf32_flop_per_s / 1e12:,.1f} TFLOP/s TF32 ({rates.source})"
    if flops is not None and flops > 0:
        work = flops * per_launch_ns / 1e9  # FLOP per launch
        t_math = work / rates.tf32_flop_per_s * 1e9
        moved = (kg.m(DRAM_READ) or 0.0) + (kg.m(DRAM_WRITE) or 0.0)
        t_mem = moved / rates.dram_bytes_per_s * 1e9 if moved and rates.dram_bytes_per_s else 0.0
        new_ns = max(t_math, t_mem) * kg.launches
        formula = (f"duration − launches × max(FLOP ÷ TF32 rate, DRAM bytes ÷ DRAM rate) = "
                   f"{fmt_time(kg.duration_ns)} − {kg.launches} × max({work / 1e9:,.1f} GFLOP ÷ {rate}, "
                   f"{moved / 1e6:,.1f} MB ÷ {(rates.dram_bytes_per_s or 0) / 1e12:,.2f} TB/s) = "
                   f"{fmt_time(kg.duration_ns - new_ns)} on {rates.gpu or 'this GPU'}")
        if rates.bf16_flop_per_s:
            bf16_ns = work / rates.bf16_flop_per_s * 1e9
            formula += f"; with BF16 inputs the math alone takes {fmt_time(bf16_ns)} per launch"
        return _gain(kg, kg.duration_ns - new_ns, formula, "upper bound")
    if not rates.fp32_flop_per_s:
        return Gain(None, None, "the report has no FP32 instruction counts and no FP32 rate is known")
    new_ns = kg.duration_ns * rates.fp32_flop_per_s / rates.tf32_flop_per_s
    return _gain(kg, kg.duration_ns - new_ns,
                 f"duration × (1 − FP32 rate ÷ TF32 rate) = {fmt_time(kg.duration_ns)} × (1 − "
                 f"{rates.fp32_flop_per_s / 1e12:,.1f} ÷ {rates.tf32_flop_per_s / 1e12:,.1f}) with {rate}, "
                 f"if the TF32 kernel reaches the same share of its peak, on {rates.gpu or 'this GPU'}",
                 "upper bound")


def rule_fp32_gemm(kg: KernelGroup) -> list[Finding]:
    """FP32 GEMM kernels on Hopper (no tensor cores)."""
    if not kg.cc.startswith("9") or not FP32_GEMM.search(kg.name):
        return []
    rates = tensor_rates(kg.device)
    flops = _fp32_flop_per_s(kg)
    ev = [Evidence("compute capability", kg.cc, "", "ncu CC"),
          Evidence("GPU", kg.device or "n/a", "", "device__attribute_display_name"),
          Evidence("tensor pipe active", _or_na(kg.m(TENSOR)), "%", TENSOR)]
    if flops is not None:
        ev.append(Evidence("achieved FP32", round(flops / 1e12, 3), "TFLOP/s",
                           "(fadd + fmul + 2·ffma) per cycle × smsp__cycles_elapsed.avg.per_second"))
    if rates is not None:
        ev.append(Evidence("TF32 tensor rate", rates.tf32_flop_per_s / 1e12, "TFLOP/s", rates.source))
    return [_base(
        kg, "ncu.fp32-gemm-on-hopper", "FP32 GEMM on Hopper leaves the tensor cores unused", "warning",
        f"{kg.name} is an FP32 (SIMT) GEMM on {kg.device or f'a compute capability {kg.cc} GPU'}, whose "
        "tensor cores run TF32/BF16/FP16 many times faster.",
        ev,
        fix="Use TF32 (same FP32 storage) or BF16/FP16 inputs with an sm90 kernel "
            "(cuBLAS/cuBLASLt, CUTLASS).",
        fix_cuda="cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);\n"
                 "cublasGemmEx(handle, ..., CUDA_R_32F, ...,\n"
                 "             CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);",
        fix_torch=("torch.backends.cuda.matmul.allow_tf32 = True\n"
                   "torch.set_float32_matmul_precision('high')   # same effect"),
        gain=_fp32_gemm_gain(kg, rates),
        verify="Re-profile: the kernel name has tf32/bf16 and sm90 in it, and tensor pipes are active.",
    )]


def rule_no_wgmma_tma(kg: KernelGroup) -> list[Finding]:
    """A matmul-like kernel on sm90 that issues no wgmma or no TMA loads."""
    if not kg.cc.startswith("9") or not MATMUL_LIKE.search(kg.name):
        return []
    gmma, tma = kg.m(GMMA), kg.m(TMA)
    if gmma is None or tma is None or (gmma > 0 and tma > 0):
        return []
    missing = [w for w, v in (("wgmma", gmma), ("TMA", tma)) if v == 0]
    return [_base(
        kg, "ncu.no-wgmma-tma", f"No {' / '.join(missing)} on sm90", "warning",
        f"{kg.name} runs on Hopper but issues {int(gmma)} wgmma and {int(tma)} TMA load instructions: "
        "it uses the pre-Hopper path (mma.sync / ld.global + shared stores).",
        [Evidence("wgmma instructions", gmma, "inst", GMMA),
         Evidence("TMA load instructions", tma, "inst", TMA)],
        fix="Use an sm90 kernel: CUTLASS 3.x (TMA + wgmma, warp-specialized) or cuBLASLt; compile "
            "for sm_90a.",
        fix_cuda="nvcc -arch=sm_90a ...   // and a CUTLASS 3 CollectiveMma with KernelTmaWarpSpecialized",
        fix_torch="torch.backends.cuda.matmul.allow_tf32 = True  # cuBLAS then picks sm90 TF32 kernels",
        gain=Gain(None, None, "not computable from this report: it depends on the replacement kernel"),
        verify="Re-profile: smsp__sass_inst_executed_op_shared_gmma.sum and _tma_ld.sum are nonzero.",
    )]


def rule_occupancy(kg: KernelGroup) -> list[Finding]:
    """Low achieved occupancy, with the launch limiter that caps it."""
    ach, theo = kg.m(ACHIEVED), kg.m(THEORETICAL)
    if ach is None or ach >= LOW_ACHIEVED_OCC_PCT:
        return []
    limits = {k: v for k, v in ((k, kg.m(m)) for k, m in LIMITS.items()) if v is not None}
    lowest = min(limits.values()) if limits else None
    limiters = [k for k, v in limits.items() if v == lowest]
    grid, sms, waves = kg.m(GRID), kg.m(SM_COUNT) or kg.m(SM_COUNT_ATTR), kg.m(WAVES)
    grid_bound = grid is not None and sms is not None and lowest is not None and grid < sms * lowest
    ev = [Evidence("achieved occupancy", ach, "%", ACHIEVED)]
    if grid is not None:
        ev.append(Evidence("grid size", grid, "blocks", GRID))
    if sms is not None:
        ev.append(Evidence("SMs", sms, "", SM_COUNT))
    if waves is not None:
        ev.append(Evidence("waves per SM", waves, "", WAVES))
    if theo is not None:
        ev.append(Evidence("theoretical occupancy", theo, "%", THEORETICAL))
    for k, v in limits.items():
        ev.append(Evidence(f"block limit ({k})", v, "blocks", LIMITS[k]))
    regs = kg.m("launch__registers_per_thread")
    if regs is not None:
        ev.append(Evidence("registers per thread", regs, "", "launch__registers_per_thread"))
    lim = " and ".join(limiters) if limiters else "unknown"
    if grid_bound and grid is not None and sms is not None and lowest is not None:
        # The grid cannot fill the GPU even at the per-SM limit: the grid, not registers, limits it.
        slots = int(sms * lowest)
        summary = (f"{kg.name} runs at {ach:.1f} % achieved occupancy"
                   + (f" (theoretical {theo:.1f} %)" if theo is not None else "")
                   + f", and the limiter is the grid: {int(grid)} block(s) for {int(sms)} SMs × "
                   f"{int(lowest)} block(s) per SM ({lim}) = {slots} slots"
                   + (f" ({waves:.2f} waves)" if waves is not None else "")
                   + f", so {int(sms) - min(int(grid), int(sms))} SMs get no block at all.")
        fix = ("Launch more blocks: split the work finer (more, smaller blocks; grid-stride or "
               "split-K), or run independent work concurrently on other streams.")
        fix_cuda = "kernel<<<num_sms * blocks_per_sm, 128>>>(...);   // at least one full wave"
        fix_torch = "# batch several small problems into one launch (torch.bmm, vmap) or use streams"
    else:
        summary = (f"{kg.name} runs at {ach:.1f} % achieved occupancy"
                   + (f" (theoretical {theo:.1f} %)" if theo is not None else "")
                   + f"; the limiter is {lim} ({int(lowest) if lowest is not None else '?'} block(s) per "
                   "SM). Tensor-core kernels often trade occupancy for big tiles; then check the pipe "
                   "utilization.")
        fix = (f"Relax the {lim} limit: fewer registers (__launch_bounds__, -maxrregcount), less shared "
               "memory per block, or smaller blocks.")
        fix_cuda = "__global__ void __launch_bounds__(256, 2) kernel(...);   // 2 blocks per SM"
        fix_torch = "# Triton: lower num_stages / BLOCK sizes, or let torch.compile autotune them"
    return [_base(
        kg, "ncu.low-occupancy", "Low occupancy: the grid is too small" if grid_bound else "Low occupancy",
        "info" if MATMUL_LIKE.search(kg.name) and not grid_bound else "warning",
        summary,
        ev,
        fix=fix,
        fix_cuda=fix_cuda,
        fix_torch=fix_torch,
        gain=Gain(None, None, "not computable from occupancy alone: more warps help only if the "
                  "kernel is latency-bound (see ncu.latency-bound)"),
        verify="Re-profile: achieved occupancy rises and the kernel is shorter.",
    )]


def _uncoalesced_kinds(kg: KernelGroup) -> list[tuple[str, float, float, float, str]]:
    """The access kinds (global loads, stores) that leave half or more of their sectors unused.

    Returns:
        (kind, sectors, requests, excess share, how the excess was computed) per such kind; the
        threshold is :data:`UNCOALESCED_EXCESS`.
    """
    out = []
    for kind, sec, req, used in (("loads", LD_SECTORS, LD_REQ, LD_BYTES_PER_SECTOR),
                                 ("stores", ST_SECTORS, ST_REQ, ST_BYTES_PER_SECTOR)):
        s, r, b = kg.m(sec), kg.m(req), kg.m(used)
        if not s or not r:
            continue
        spr = s / r
        if b is not None and b > 0:
            # Bytes the instructions asked for per 32-byte sector moved: 32 is a perfect access
            # whatever its width (a float4 copy moves 16 sectors per request and wastes none).
            excess, how = 1.0 - b / SECTOR_BYTES, f"1 − {used} ÷ {SECTOR_BYTES:.0f}"
        else:  # without it: 4-byte accesses assumed (4 sectors per request is ideal)
            excess = 1.0 - SECTORS_PER_REQUEST_IDEAL / spr if spr > SECTORS_PER_REQUEST_IDEAL else 0.0
            how = f"1 − {SECTORS_PER_REQUEST_IDEAL:.0f} ÷ sectors per request"
        if excess >= UNCOALESCED_EXCESS:
            out.append((kind, s, r, excess, how))
    return out


def rule_uncoalesced(kg: KernelGroup) -> list[Finding]:
    """Global loads/stores that touch many more sectors per request than a coalesced access.

    One finding per kernel: ncu's UncoalescedGlobalAccess estimate covers loads and stores together,
    so both kinds share one gain (never counted twice).
    """
    kinds = _uncoalesced_kinds(kg)
    if not kinds:
        return []
    sectors = sum(k[1] for k in kinds)
    excess = sum(k[1] * k[3] for k in kinds) / sectors  # sector-weighted over the kinds
    what = " and ".join(k[0] for k in kinds)
    own = kg.ncu_rules.get("UncoalescedGlobalAccess")
    mem = kg.m(MEM)
    ev: list[Evidence] = []
    if own is not None:
        gain = _gain(kg, kg.duration_ns * min(own, 100 * excess) / 100,
                     f"duration × ncu's UncoalescedGlobalAccess estimate, capped by the excess "
                     f"sectors = {fmt_time(kg.duration_ns)} × min({own:.2f} %, {100 * excess:.1f} %)",
                     "estimate")
        ev.append(Evidence(UNCAPPED, round(kg.duration_ns * own / 100, 1), "ns",
                           "duration × ncu's UncoalescedGlobalAccess estimate"))
    elif mem is not None:
        gain = _gain(kg, kg.duration_ns * excess * mem / 100,
                     f"duration × excess sectors × memory throughput = {fmt_time(kg.duration_ns)} × "
                     f"{100 * excess:.1f} % × {mem:.1f} %: the memory "
                     "system's busy time spent on sectors a coalesced access would not move",
                     "estimate")
    else:
        gain = Gain(None, None, "not computable: the report has no memory throughput")
    for kind, s, r, x, how in kinds:
        tag = f" ({kind})" if len(kinds) > 1 else ""
        ev += [Evidence(f"sectors{tag}", s, "sectors", LD_SECTORS if kind == "loads" else ST_SECTORS),
               Evidence(f"requests{tag}", r, "requests", LD_REQ if kind == "loads" else ST_REQ),
               Evidence(f"sectors per request{tag}", round(s / r, 2), "sectors", "sectors ÷ requests")]
        if tag:
            ev.append(Evidence(f"excess sectors{tag}", round(100 * x, 1), "%", how))
    ev += [Evidence("excess sectors", round(100 * excess, 1), "%",
                    kinds[0][4] if len(kinds) == 1 else "sector-weighted over loads and stores"),
           Evidence("bytes moved in excess", round(sectors * excess * SECTOR_BYTES), "bytes",
                    "sectors × excess share × 32 B")]
    per = ", ".join(f"{s / r:.1f} sectors per global {kind[:-1]} request" for kind, s, r, _x, _h in kinds)
    return [_base(
        kg, "ncu.uncoalesced", f"Uncoalesced global {what}", "warning",
        f"{kg.name}: {per}; {100 * excess:.0f} % of the bytes moved are not used "
        f"({sectors * excess * SECTOR_BYTES / 1e6:,.1f} MB per launch).",
        ev,
        fix="Make consecutive threads access consecutive addresses (transpose through shared "
            "memory, structure-of-arrays).",
        fix_cuda="float v = in[blockIdx.x * blockDim.x + threadIdx.x];   // not in[threadIdx.x * stride]",
        fix_torch="x = x.contiguous()   # before custom kernels; avoid strided views",
        gain=gain,
        verify="Re-profile: sectors per request close to 4.",
    )]


def rule_bank_conflicts(kg: KernelGroup) -> list[Finding]:
    """Shared-memory bank conflicts as a share of shared-memory wavefronts."""
    c, w = kg.m(BANK_CONFLICTS), kg.m(SHARED_WAVEFRONTS)
    if not c or not w:
        return []
    share = 100 * c / w
    if share < BANK_CONFLICT_SHARE_PCT:
        return []
    return [_base(
        kg, "ncu.bank-conflicts", "Shared-memory bank conflicts", "warning",
        f"{kg.name}: {c:,.0f} bank conflicts over {w:,.0f} shared-memory wavefronts ({share:.1f} %).",
        [Evidence("bank conflicts", c, "", BANK_CONFLICTS),
         Evidence("shared wavefronts", w, "", SHARED_WAVEFRONTS),
         Evidence("conflict share", round(share, 2), "%", "conflicts ÷ wavefronts")],
        fix="Pad shared arrays by one element per row or swizzle the layout.",
        fix_cuda="__shared__ float tile[32][33];   // +1 column avoids 32-way conflicts",
        fix_torch="# Triton/torch.compile kernels swizzle automatically; check custom CUDA extensions",
        gain=Gain(None, None, "not estimated: the time conflicts cost depends on how often the "
                  "shared-memory pipe is the limiter"),
        verify="Re-profile: l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum near 0.",
    )]


def rule_spills(kg: KernelGroup) -> list[Finding]:
    """Register spills to local memory."""
    sp = kg.m(SPILLS) or 0.0
    rq = kg.m(LOCAL_SPILL_REQ) or 0.0
    if sp <= 0 and rq <= 0:
        return []
    return [_base(
        kg, "ncu.register-spills", "Registers spill to local memory", "warning",
        f"{kg.name} executes {sp:,.0f} spill instructions ({rq:,.0f} local spilling requests).",
        [Evidence("spill instructions", sp, "inst", SPILLS),
         Evidence("local spilling requests", rq, "", LOCAL_SPILL_REQ)],
        fix="Reduce live registers (smaller tiles/unrolling) or raise the register cap with "
            "__launch_bounds__.",
        fix_cuda="nvcc -Xptxas -v ...   // shows 'bytes spill stores'",
        fix_torch="# Triton: smaller BLOCK sizes or num_warps",
        gain=Gain(None, None, "not estimated: the time spills cost depends on whether local memory "
                  "hits in L1"),
        verify="Re-profile: sass__inst_executed_register_spilling is 0.",
    )]


def rule_launch_bound_kernel(kg: KernelGroup) -> list[Finding]:
    """ncu_verdict's launch-bound: the kernel is too short or too small to fill the GPU."""
    if kg.verdict is None or kg.verdict.kind != "launch-bound":
        return []
    return [_base(
        kg, "ncu.kernel-launch-bound", "Too short or too small to fill the GPU", "warning",
        f"{kg.name}: {kg.verdict.reason}",
        [Evidence(k, v, "", "engine.analysis.ncu.verdict") for k, v in kg.verdict.numbers.items()
         if isinstance(v, (int, float)) and k in ("duration_ns", "grid_blocks", "sm_count")],
        fix="Fuse it with its neighbours, batch more work per launch, or replay it in a CUDA Graph.",
        fix_cuda="cudaGraphLaunch(exec, stream);   // many small launches captured once",
        fix_torch="torch.compile(model, mode='reduce-overhead')   # CUDA graphs + fusion",
        gain=Gain(None, None, "see nsys.launch-bound in an nsys report of the same run: launch "
                  "overhead is a host-side cost that ncu does not measure"),
        verify="Re-profile: fewer, longer kernels.",
    )]


KERNEL_RULES: list[Callable[[KernelGroup], list[Finding]]] = [
    rule_latency_bound, rule_launch_bound_kernel, rule_tensor_pipes, rule_fp32_gemm, rule_no_wgmma_tma,
    rule_occupancy, rule_uncoalesced, rule_bank_conflicts, rule_spills,
]
