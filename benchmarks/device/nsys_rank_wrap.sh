#!/usr/bin/env bash
# Per-rank Nsight Systems wrapper for torchrun --no-python:
#   torchrun --standalone --nproc_per_node 2 --no-python bash nsys_rank_wrap.sh OUTPREFIX CMD ARGS...
# runs  $KS_NSYS profile $KS_NSYS_FLAGS -o OUTPREFIX%q{RANK} CMD ARGS...  (one report per rank).
# Always exits 0: nsys's failed import step on the lent machine must not make torchrun kill the
# other rank while that one is still writing its report.
prefix=$1; shift
# shellcheck disable=SC2086  # KS_NSYS_FLAGS is a space-separated flag list without spaces inside flags
"$KS_NSYS" profile $KS_NSYS_FLAGS -o "${prefix}%q{RANK}" "$@"
echo "rank ${RANK:-?}: nsys profile rc=$?"
exit 0
