"""A PyTorch program whose kernels have many kinds of C++ names (CUB, thrust, ATen, cuBLAS) for
checking kernel-name simplification against ncu (benchmarks/device_ncu_names.sh)."""

import torch

x = torch.randn(1 << 20, device="cuda")
i = torch.randint(0, 1000, (1 << 16,), device="cuda")
torch.sort(x)                     # CUB radix sort (at_cuda_detail::cub::...)
torch.cumsum(i, 0)                # CUB scan
torch.unique(i)                   # thrust / CUB
torch.topk(x, 8)                  # at::native::sbtopk
x.index_select(0, i)              # index kernels
torch.nn.functional.embedding(i, torch.randn(1000, 64, device="cuda"))
torch.bincount(i)
torch.nonzero(x > 0)
a = torch.randn(256, 256, device="cuda", dtype=torch.half)
a @ a                             # cuBLAS / cutlass
torch.nn.functional.softmax(a, -1)
x.max()
torch.cuda.synchronize()
