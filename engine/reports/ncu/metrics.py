"""The catalogue of Nsight Compute metric names that Kernelscope reads, and which to decode first.

These are facts about ncu reports (metric names, the sections they belong to, the occupancy
limiters, the instruction and tensor paths behind a roofline), kept with the reader so that the
reader can decode the metrics the summary needs up front (:func:`summary_metrics`) without
importing the analysis that uses them. :mod:`engine.analysis.ncu` builds on these names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.reports.ncu.model import NcuReport

DURATION = "gpu__time_duration.sum"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_PCT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_PCT = "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"
ACHIEVED_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCC = "sm__maximum_warps_per_active_cycle_pct"
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"

#: (title, ncu section identifier that collects the metrics, ((metric, label), ...)).
#: The identifier is what ``ncu --section`` takes; every one of them is also in ``--set full``.
LAYOUT: list[tuple[str, str, tuple[tuple[str, str], ...]]] = [
    ("GPU Speed Of Light", "SpeedOfLight", (
        (DURATION, "Duration"),
        (SM_PCT, "Compute (SM) Throughput"),
        (MEM_PCT, "Memory Throughput"),
        (DRAM_PCT, "DRAM Throughput"),
        ("l1tex__throughput.avg.pct_of_peak_sustained_active", "L1/TEX Cache Throughput"),
        ("lts__throughput.avg.pct_of_peak_sustained_elapsed", "L2 Cache Throughput"),
        ("gpc__cycles_elapsed.max", "Elapsed Cycles"),
        ("sm__cycles_active.avg", "SM Active Cycles"),
        ("gpc__cycles_elapsed.avg.per_second", "SM Frequency"),
        ("dram__cycles_elapsed.avg.per_second", "DRAM Frequency"),
    )),
    ("Memory Workload Analysis", "MemoryWorkloadAnalysis", (
        ("dram__bytes.sum.per_second", "DRAM Bandwidth"),
        ("gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Busy"),
        ("gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed", "Max Bandwidth"),
        ("sm__memory_throughput.avg.pct_of_peak_sustained_elapsed", "Mem Pipes Busy"),
        ("l1tex__t_sector_hit_rate.pct", "L1/TEX Hit Rate"),
        ("lts__t_sector_hit_rate.pct", "L2 Hit Rate"),
        ("derived__local_spilling_requests", "Local Memory Spilling Requests"),
    )),
    ("Memory Workload Analysis", "MemoryWorkloadAnalysis_Chart", (
        ("dram__bytes_read.sum", "DRAM Bytes Read"),
        ("dram__bytes_write.sum", "DRAM Bytes Written"),
    )),
    ("Memory Workload Analysis", "MemoryWorkloadAnalysis_Tables", (
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "Shared Load Bank Conflicts"),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "Shared Store Bank Conflicts"),
        ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum", "Shared Bank Conflicts (all)"),
    )),
    ("Launch Statistics", "LaunchStats", (
        ("launch__grid_size", "Grid Size"),
        ("launch__block_size", "Block Size"),
        ("launch__thread_count", "Threads"),
        ("launch__registers_per_thread", "Registers Per Thread"),
        ("launch__shared_mem_per_block_static", "Static Shared Memory Per Block"),
        ("launch__shared_mem_per_block_dynamic", "Dynamic Shared Memory Per Block"),
        ("launch__shared_mem_per_block_driver", "Driver Shared Memory Per Block"),
        ("launch__shared_mem_config_size", "Shared Memory Configuration Size"),
        ("launch__cluster_size", "Cluster Size"),
        ("launch__sm_count", "# SMs"),
        ("launch__waves_per_multiprocessor", "Waves Per SM"),
    )),
    ("Occupancy", "Occupancy", (
        (THEORETICAL_OCC, "Theoretical Occupancy"),
        (ACHIEVED_OCC, "Achieved Occupancy"),
        ("sm__maximum_warps_avg_per_active_cycle", "Theoretical Active Warps per SM"),
        ("sm__warps_active.avg.per_cycle_active", "Achieved Active Warps Per SM"),
        ("launch__occupancy_limit_registers", "Block Limit Registers"),
        ("launch__occupancy_limit_shared_mem", "Block Limit Shared Mem"),
        ("launch__occupancy_limit_warps", "Block Limit Warps"),
        ("launch__occupancy_limit_blocks", "Block Limit SM"),
        ("launch__occupancy_limit_barriers", "Block Limit Barriers"),
    )),
    ("Compute Workload Analysis", "ComputeWorkloadAnalysis", (
        ("sm__inst_executed.avg.per_cycle_active", "Executed Ipc Active"),
        ("sm__inst_executed.avg.per_cycle_elapsed", "Executed Ipc Elapsed"),
        ("sm__inst_issued.avg.pct_of_peak_sustained_elapsed", "Issue Slots Busy"),
        ("sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed", "SM Busy"),
        ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active", "Pipe ALU"),
        ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe FMA"),
        ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active", "Pipe FP64"),
        ("sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Shared (FP16+Tensor)"),
        ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (All)"),
        ("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (FP)"),
        ("sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (INT)"),
        ("sm__pipe_tensor_op_dmma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe Tensor (DP)"),
        ("sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
         "Inst Tensor (Warp Group, wgmma)"),
        ("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active", "Inst LSU"),
        ("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "Inst XU"),
        ("sm__pipe_tma_cycles_active.avg.pct_of_peak_sustained_active", "Pipe TMA"),
    )),
    ("Scheduler and Warp State", "SchedulerStats", (
        ("smsp__warps_active.avg.per_cycle_active", "Active Warps Per Scheduler"),
        ("smsp__warps_eligible.avg.per_cycle_active", "Eligible Warps Per Scheduler"),
        ("smsp__issue_active.avg.per_cycle_active", "Issued Warp Per Scheduler"),
        ("smsp__issue_active.avg.pct_of_peak_sustained_active", "One or More Eligible"),
        ("smsp__issue_inst0.avg.pct_of_peak_sustained_active", "No Eligible"),
    )),
    ("Scheduler and Warp State", "WarpStateStats", (
        ("smsp__average_warp_latency_per_inst_issued.ratio", "Warp Cycles Per Issued Instruction"),
        ("smsp__thread_inst_executed_per_inst_executed.ratio", "Avg. Active Threads Per Warp"),
    )),
    ("Source Counters", "SourceCounters", (
        ("smsp__inst_executed_op_branch.sum", "Branch Instructions"),
        ("smsp__sass_average_branch_targets_threads_uniform.pct", "Branch Efficiency"),
        ("smsp__sass_branch_targets_threads_divergent.avg", "Avg. Divergent Branches"),
    )),
]

#: Occupancy limiters: (block-limit metric, what limits).
LIMITERS = [
    ("launch__occupancy_limit_registers", "registers"),
    ("launch__occupancy_limit_shared_mem", "shared memory"),
    ("launch__occupancy_limit_warps", "warps"),
    ("launch__occupancy_limit_blocks", "blocks"),
    ("launch__occupancy_limit_barriers", "barriers"),
]

# Accepted names for each input: kernel_table() columns first, then ncu metric names.
VERDICT_KEYS = {
    "sm_pct": ("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    "mem_pct": ("memory_throughput_pct", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
    "dram_pct": ("dram_throughput_pct", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
    "l1_pct": ("l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active"),
    "l2_pct": ("l2_throughput_pct", "lts__throughput.avg.pct_of_peak_sustained_elapsed"),
    "duration_ns": ("duration_ns", "gpu__time_duration.sum"),
    "blocks": ("grid_blocks", "launch__grid_size"),
    "sms": ("sm_count", "launch__sm_count", "device__attribute_multiprocessor_count"),
    "waves": ("waves_per_sm", "launch__waves_per_multiprocessor"),
    "achieved_occ": ("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    "theoretical_occ": ("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct"),
    "eligible": ("eligible_warps_per_scheduler", "smsp__warps_eligible.avg.per_cycle_active"),
    "top_stall": ("top_stall",),
    "top_stall_cycles": ("top_stall_cycles",),
}

SMSP_INST = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum.per_cycle_elapsed"
PEAK_INST = "sm__sass_thread_inst_executed_op_{}_pred_on.sum.peak_sustained"
SM_HZ = "sm__cycles_elapsed.avg.per_second"
SMSP_HZ = "smsp__cycles_elapsed.avg.per_second"

#: precision → ((instruction, flops per thread instruction), ...), peak instruction and its factor.
SCALAR: dict[str, tuple[tuple[tuple[str, float], ...], tuple[str, float]]] = {
    "FP64": ((("dadd", 1.0), ("dmul", 1.0), ("dfma", 2.0)), ("dfma", 2.0)),
    "FP32": ((("fadd", 1.0), ("fmul", 1.0), ("ffma", 2.0)), ("ffma", 2.0)),
    "FP16": ((("hadd", 2.0), ("hmul", 2.0), ("hfma", 4.0)), ("hfma", 4.0)),
}
#: Tensor data paths (``sm__ops_path_tensor_src_<path>``) → display name.
TENSOR_PATHS = {
    "fp64": "FP64", "tf32_dst_fp32": "TF32", "fp16": "FP16", "bf16_dst_fp32": "BF16",
    "fp8_sparsity_off": "FP8", "fp8_sparsity_on": "FP8 sparse", "int8": "INT8", "int1": "INT1",
}
#: Dense (no 2:4 sparsity) instruction paths whose peak is a data type's tensor ceiling: the
#: ``src_<type>`` path's own peak is that of its fastest instruction, the sparse one (twice the dense
#: rate), so on an H200 it would put the FP16 roof at the sparse 2 PFLOP/s. wgmma first (Hopper).
DENSE_TENSOR_PEAKS: dict[str, tuple[str, ...]] = {
    "fp16": ("hgmma_src_fp16_sparsity_off", "hmma_src_fp16_dst_fp32_sparsity_off"),
    "bf16_dst_fp32": ("hgmma_src_bf16_dst_fp32_sparsity_off", "hmma_src_bf16_dst_fp32_sparsity_off"),
    "tf32_dst_fp32": ("hgmma_src_tf32_dst_fp32_sparsity_off", "hmma_src_tf32_dst_fp32_sparsity_off"),
    "int8": ("igmma_src_int8_sparsity_off", "imma_src_int8_sparsity_off"),
}
#: level → (achieved bytes/s, peak bytes per cycle, cycles per second of that unit).
LEVELS = {
    "DRAM": ("dram__bytes.sum.per_second", "dram__bytes.sum.peak_sustained",
             "dram__cycles_elapsed.avg.per_second"),
    "L2": ("derived__lts__lts2xbar_bytes.sum.per_second", "derived__lts__lts2xbar_bytes.sum.peak_sustained",
           "lts__cycles_elapsed.avg.per_second"),
    "L1": ("derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.per_second",
           "derived__l1tex__lsu_writeback_bytes_mem_lgds.sum.peak_sustained",
           "l1tex__cycles_elapsed.avg.per_second"),
}


def top_stalls(report: NcuReport, kid: int, n: int = 5) -> list[tuple[str, float]]:
    """The largest warp stall reasons (cycles per issued instruction), ``selected`` excluded."""
    out = []
    for name in report.metric_names_matching(STALL_PREFIX, STALL_SUFFIX):
        reason = name[len(STALL_PREFIX):-len(STALL_SUFFIX)]
        x = report.value(kid, name)
        if reason != "selected" and x is not None:
            out.append((reason, x))
    out.sort(key=lambda t: -t[1])
    return out[:n]


def summary_metrics() -> tuple[frozenset[str], tuple[tuple[str, str], ...]]:
    """The metrics that the summary reads: kernel table, verdicts, sections, rules and roofline.

    A ``.ncu-rep`` reader decodes these for every kernel up front and any other metric only when
    it is asked for (the details and raw pages need them all).

    Returns:
        (metric names, (prefix, suffix) patterns of further names such as the stall reasons).
    """
    names = {metric for _title, _section, metrics in LAYOUT for metric, _label in metrics}
    names |= {metric for metric, _what in LIMITERS}
    names |= {"dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__pcsamp_sample_count",
              "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active"}
    names |= {name for keys in VERDICT_KEYS.values() for name in keys[1:]}
    names |= {SM_HZ, SMSP_HZ}
    for ops, (inst, _factor) in SCALAR.values():
        names.add(PEAK_INST.format(inst))
        names |= {SMSP_INST.format(op) for op, _f in ops}
    for path in TENSOR_PATHS:
        dense = DENSE_TENSOR_PEAKS.get(path, ())
        names |= {f"sm__ops_path_tensor_op_{d}.sum.peak_sustained" for d in dense}
        names |= {f"sm__ops_path_tensor_src_{path}.sum.peak_sustained",
                  f"sm__ops_path_tensor_src_{path}.sum.per_cycle_elapsed"}
    names |= {metric for level in LEVELS.values() for metric in level}
    # the Info view's GPU row (engine.reports.ncu.trace)
    names |= {"device__attribute_multiprocessor_count", "device__attribute_l2_cache_size",
              "device__attribute_clock_rate"}
    return frozenset(names), ((STALL_PREFIX, STALL_SUFFIX),)
