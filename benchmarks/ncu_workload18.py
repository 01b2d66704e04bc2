"""A PyTorch program with 18 distinct CUDA kernel launches, for recording an ncu ``--set full`` report.

Used by benchmarks/device_record_ncu.sh to make the 18-kernel report that bench_ncu.py loads
(issue 3's speed target). Small shapes: under ncu each kernel is replayed ~40 times.
"""

import torch
import torch.nn.functional as F

torch.manual_seed(0)
dev = "cuda"
a = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
b = torch.randn(1024, 1024, device=dev, dtype=torch.bfloat16)
x = torch.randn(4096, 1024, device=dev)
q = torch.randn(4, 8, 512, 64, device=dev, dtype=torch.float16)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("workload18")
ops = [
    lambda: a @ b,                                   # bf16 GEMM (tensor cores)
    lambda: x.float() @ x.float().T[:, :1024],        # fp32 GEMM
    lambda: F.softmax(x, dim=-1),
    lambda: F.layer_norm(x, (1024,)),
    lambda: F.gelu(x),
    lambda: x + 1.0,
    lambda: x * x,
    lambda: x.sum(dim=0),
    lambda: x.max(dim=1).values,
    lambda: torch.cumsum(x, dim=1),
    lambda: x.t().contiguous(),
    lambda: F.scaled_dot_product_attention(q, q, q),
    lambda: torch.sort(x[:64], dim=1).values,
    lambda: x.to(torch.float16),
    lambda: torch.relu(x),
    lambda: x.exp(),
    lambda: torch.topk(x[:256], 8, dim=1).values,
    lambda: x.double().sum(),
]
for op in ops:
    op()
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print("ok", len(ops), "ops")
