"""Multi-rank jobs: line the ranks up on one clock, match NCCL collectives, name the straggler."""

from engine.analysis.ranks.analyze import analyze_paths, analyze_ranks
from engine.analysis.ranks.model import (
           SCHEMA,
           ClockInfo,
           Collective,
           RankRow,
           RanksResult,
           StepCost,
           Straggler,
)
from engine.analysis.ranks.text import format_ranks

__all__ = ["SCHEMA", "ClockInfo", "Collective", "RankRow", "RanksResult", "StepCost", "Straggler",
           "analyze_paths", "analyze_ranks", "format_ranks"]
