// Kernels whose demangled names exercise Nsight Compute's kernel renaming, for the ncu flag matrix
// (benchmarks/device/record_ncu_matrix.sh):
//   nvcc -O2 -arch=sm_90 -lineinfo --extended-lambda -o ncu_matrix ncu_matrix.cu
//   ./ncu_matrix MODE        MODE = all | app | range | fork | child | graph
// Names: class templates and function templates in nested namespaces (ks::detail::, ks::ops::,
// outer::mid::inner::), anonymous namespaces (top level and nested), const pointer and const
// reference parameters, a const member operator in a functor argument, an extended __device__ lambda,
// integer, bool, enum and negative template arguments, a struct type from another namespace as an
// argument, and an extern "C" kernel.
// Modes:
//  all    every kernel once, each inside an NVTX push/pop range "phase_<n>" (ranges nest under "work")
//  app    two kernels, deterministic (for --replay-mode application)
//  range  one kernel outside, cudaProfilerStart, three kernels, cudaProfilerStop, one kernel outside
//  fork   fork() before any CUDA call; the child exec()s this program in mode "child" (two kernels);
//         the parent waits, then launches one kernel
//  graph  three kernels captured into a CUDA graph on a stream, the graph launched twice
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

namespace ks {
enum class Mode { Copy = 0, Scale = 1 };
struct Shape { int n; int stride; };

namespace ops {
template <typename T> struct Add {
  __device__ T operator()(const T& a, const T& b) const { return a + b; }
};
template <typename T> struct Mul {
  __device__ T operator()(const T& a, const T& b) const { return a * b; }
};
}  // namespace ops

namespace detail {
template <typename T, typename Op>
__global__ void binary_kernel(const T* __restrict__ a, const T* __restrict__ b, T* c, ks::Shape s, Op op) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < s.n) c[i] = op(a[i * s.stride], b[i]);
}

namespace {
template <typename T, int Unroll, bool Check>
__global__ void scale_kernel(const T* in, T* out, T alpha, int n) {
  int base = (blockIdx.x * blockDim.x + threadIdx.x) * Unroll;
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    int i = base + u;
    if (!Check || i < n) out[i] = alpha * in[i];
  }
}
}  // namespace

template <Mode M, int Shift>
__global__ void mode_kernel(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = (M == Mode::Scale ? 2.f : 1.f) * p[i] + float(Shift);
}
}  // namespace detail

template <typename F>
__global__ void apply_kernel(int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) f(i);
}
}  // namespace ks

namespace outer { namespace mid { namespace inner {
template <class T, unsigned K>
__global__ void deep_reduce(const T* const in, T* out, int n) {
  __shared__ T buf[256];
  T acc = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i] * T(K);
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, buf[0]);
}
}}}  // namespace outer::mid::inner

namespace {
__global__ void anon_fill(float* p, int n, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = v;
}
}  // namespace

extern "C" __global__ void c_saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

struct Bufs {
  int n = 1 << 20;
  float *a, *b, *c, *r;
  double *d;
};

static void alloc(Bufs& b) {
  size_t bytes = size_t(b.n) * sizeof(float);
  CK(cudaMalloc(&b.a, bytes * 2)); CK(cudaMalloc(&b.b, bytes)); CK(cudaMalloc(&b.c, bytes));
  CK(cudaMalloc(&b.r, sizeof(float))); CK(cudaMalloc(&b.d, size_t(b.n) * sizeof(double)));
  CK(cudaMemset(b.a, 0, bytes * 2)); CK(cudaMemset(b.b, 0, bytes)); CK(cudaMemset(b.c, 0, bytes));
  CK(cudaMemset(b.r, 0, sizeof(float))); CK(cudaMemset(b.d, 0, size_t(b.n) * sizeof(double)));
  CK(cudaDeviceSynchronize());
}

static int grid(int n, int blk) { return (n + blk - 1) / blk; }

static void k_fill(Bufs& b, cudaStream_t s) { anon_fill<<<grid(b.n, 256), 256, 0, s>>>(b.b, b.n, 1.f); }
static void k_add(Bufs& b, cudaStream_t s) {
  ks::detail::binary_kernel<<<grid(b.n, 256), 256, 0, s>>>(b.a, b.b, b.c, ks::Shape{b.n, 2},
                                                           ks::ops::Add<float>{});
}
static void k_mul(Bufs& b, cudaStream_t s) {
  ks::detail::binary_kernel<<<grid(b.n, 128), 128, 0, s>>>(b.d, b.d, b.d, ks::Shape{b.n, 1},
                                                           ks::ops::Mul<double>{});
}
static void k_scale(Bufs& b, cudaStream_t s) {
  ks::detail::scale_kernel<float, 4, true><<<grid(b.n / 4, 256), 256, 0, s>>>(b.a, b.c, 0.5f, b.n);
}
static void k_mode(Bufs& b, cudaStream_t s) {
  ks::detail::mode_kernel<ks::Mode::Scale, -1><<<grid(b.n, 512), 512, 0, s>>>(b.c, b.n);
}
static void k_lambda(Bufs& b, cudaStream_t s) {
  float* c = b.c;
  ks::apply_kernel<<<grid(b.n, 256), 256, 0, s>>>(b.n, [=] __device__(int i) { c[i] = c[i] * c[i]; });
}
static void k_reduce(Bufs& b, cudaStream_t s) {
  outer::mid::inner::deep_reduce<float, 3u><<<132, 256, 0, s>>>(b.c, b.r, b.n);
}
static void k_saxpy(Bufs& b, cudaStream_t s) { c_saxpy<<<grid(b.n, 256), 256, 0, s>>>(b.n, 2.f, b.b, b.c); }

static void ranged(const char* name, void (*f)(Bufs&, cudaStream_t), Bufs& b) {
  nvtxRangePushA(name);
  f(b, 0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  nvtxRangePop();
}

static int run_graph(Bufs& b) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  k_fill(b, s);
  k_scale(b, s);
  k_reduce(b, s);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  nvtxRangePushA("graph_launches");
  for (int i = 0; i < 2; ++i) CK(cudaGraphLaunch(ge, s));
  CK(cudaStreamSynchronize(s));
  nvtxRangePop();
  k_saxpy(b, s);  // one plain launch after the graph
  CK(cudaStreamSynchronize(s));
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  if (strcmp(mode, "fork") == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/proc/self/exe", argv[0], "child", (char*)nullptr);
      perror("execl");
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    Bufs b; alloc(b);
    ranged("parent_reduce", k_reduce, b);
    printf("parent %d done, child status %d\n", (int)getpid(), st);
    return 0;
  }
  Bufs b; alloc(b);
  if (strcmp(mode, "child") == 0) {
    ranged("child_fill", k_fill, b);
    ranged("child_add", k_add, b);
  } else if (strcmp(mode, "all") == 0) {
    nvtxRangePushA("work");
    ranged("phase_fill", k_fill, b);
    ranged("phase_add", k_add, b);
    ranged("phase_mul", k_mul, b);
    ranged("phase_scale", k_scale, b);
    ranged("phase_mode", k_mode, b);
    ranged("phase_lambda", k_lambda, b);
    ranged("phase_reduce", k_reduce, b);
    ranged("phase_saxpy", k_saxpy, b);
    nvtxRangePop();
  } else if (strcmp(mode, "app") == 0) {
    ranged("phase_add", k_add, b);
    ranged("phase_reduce", k_reduce, b);
  } else if (strcmp(mode, "range") == 0) {
    ranged("outside_before", k_fill, b);
    CK(cudaProfilerStart());
    nvtxRangePushA("profiled_range");
    k_add(b, 0);
    k_scale(b, 0);
    k_lambda(b, 0);
    nvtxRangePop();
    CK(cudaProfilerStop());
    CK(cudaDeviceSynchronize());
    ranged("outside_after", k_saxpy, b);
  } else if (strcmp(mode, "graph") == 0) {
    run_graph(b);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  CK(cudaDeviceSynchronize());
  printf("%s done\n", mode);
  return 0;
}
