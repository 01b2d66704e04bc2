"""A 2-process data-parallel job for tests: gloo all-reduce on CPU (run by torchrun, no GPU needed)."""

import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4) * (rank + 1)
for _ in range(3):
    dist.all_reduce(t)
print(f"rank {rank} of {dist.get_world_size()} RANK={os.environ['RANK']} sum={t[0].item():g}", flush=True)
dist.destroy_process_group()
