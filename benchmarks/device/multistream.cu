// Multi-stream CUDA C++ workload for Nsight Systems fixtures.
//   nvcc -O2 -arch=sm_90 -lineinfo -o multistream multistream.cu -lpthread
//   ./multistream [iters=6]
// What it does, in order:
//  * 4 non-blocking streams, a chunked pipeline per stream: pinned H2D cudaMemcpyAsync -> kernel ->
//    pinned D2H cudaMemcpyAsync, so copies and kernels of different streams overlap; stream 3 waits
//    on an event recorded in stream 0 (cudaStreamWaitEvent) each iteration.
//  * some pageable copies: cudaMemcpy (synchronous) and cudaMemcpyAsync from malloc'ed memory.
//  * NVTX: push/pop ranges ("iteration N", nested "enqueue stream S", "pageable copies",
//    "unified memory", "os runtime"), marks, a range in a named domain ("kernelscope"), and
//    nvtxRangeStartA/End ranges: "io_thread_lifetime" started on the main thread and ended on the
//    worker thread, "um_phase" started and ended on the main thread.
//  * OS runtime calls: usleep, open/write/fsync/close and open/read/close of a temp file, a pthread
//    worker doing file IO and sleeping, pthread mutex lock/unlock, pthread_join.
//  * unified memory: cudaMallocManaged 64 MiB, first touched on the CPU, then a GPU kernel (GPU page
//    faults, H->D migration), then the CPU reads it back (CPU page faults, D->H migration), then the
//    GPU again.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

__global__ void scale_work(float* x, int n, float a, int reps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    for (int r = 0; r < reps; ++r) v = v * a + 0.5f * __sinf(v);
    x[i] = v;
  }
}

__global__ void um_touch(float* x, size_t n, float add) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (; i < n; i += stride) x[i] += add;
}

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static long g_bytes = 0;

struct WorkerArg { nvtxRangeId_t lifetime; int id; };

static void file_io(const char* path, size_t bytes) {
  std::vector<char> buf(bytes, 'k');
  int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd >= 0) {
    ssize_t w = write(fd, buf.data(), buf.size());
    fsync(fd);
    close(fd);
    (void)w;
  }
  fd = open(path, O_RDONLY);
  if (fd >= 0) {
    ssize_t r = read(fd, buf.data(), buf.size());
    close(fd);
    pthread_mutex_lock(&g_mu);
    g_bytes += r > 0 ? r : 0;
    pthread_mutex_unlock(&g_mu);
  }
  unlink(path);
}

static void* worker(void* p) {
  WorkerArg* a = (WorkerArg*)p;
  nvtxRangePushA("worker io");
  char path[64];
  snprintf(path, sizeof path, "/tmp/ks_multistream_w%d.bin", a->id);
  for (int k = 0; k < 3; ++k) {
    file_io(path, 4 << 20);
    usleep(3000);
  }
  nvtxRangePop();
  nvtxRangeEnd(a->lifetime);  // started on the main thread, ended here
  return nullptr;
}

int main(int argc, char** argv) {
  const int iters = argc > 1 ? atoi(argv[1]) : 6;
  const int NS = 4, chunks = 4;
  const int n = 1 << 22;                  // 16 MiB per chunk buffer
  const size_t bytes = size_t(n) * sizeof(float);

  nvtxDomainHandle_t dom = nvtxDomainCreateA("kernelscope");
  nvtxEventAttributes_t ea;
  memset(&ea, 0, sizeof ea);
  ea.version = NVTX_VERSION;
  ea.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  ea.colorType = NVTX_COLOR_ARGB;
  ea.color = 0xff3377cc;
  ea.messageType = NVTX_MESSAGE_TYPE_ASCII;
  ea.message.ascii = "setup (domain kernelscope)";
  nvtxDomainRangePushEx(dom, &ea);

  cudaStream_t st[NS];
  for (int s = 0; s < NS; ++s) CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
  cudaEvent_t ev;
  CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  float *h[NS], *d[NS];
  for (int s = 0; s < NS; ++s) {
    CK(cudaMallocHost(&h[s], bytes * chunks));
    CK(cudaMalloc(&d[s], bytes * chunks));
    for (size_t i = 0; i < size_t(n) * chunks; ++i) h[s][i] = float(i % 97) * 0.01f;
  }
  float* pageable = (float*)malloc(bytes);
  for (int i = 0; i < n; ++i) pageable[i] = float(i % 13);
  float* dpage;
  CK(cudaMalloc(&dpage, bytes));
  nvtxDomainRangePop(dom);

  // nvtxRangeStart on main, ended on the worker thread
  nvtxRangeId_t life = nvtxRangeStartA("io_thread_lifetime");
  WorkerArg wa{life, 0};
  pthread_t th;
  pthread_create(&th, nullptr, worker, &wa);

  for (int it = 0; it < iters; ++it) {
    char name[64];
    snprintf(name, sizeof name, "iteration %d", it);
    nvtxRangePushA(name);
    for (int s = 0; s < NS; ++s) {
      snprintf(name, sizeof name, "enqueue stream %d", s);
      nvtxRangePushA(name);
      if (s == 3) CK(cudaStreamWaitEvent(st[3], ev, 0));
      for (int c = 0; c < chunks; ++c) {
        float* hc = h[s] + size_t(c) * n;
        float* dc = d[s] + size_t(c) * n;
        CK(cudaMemcpyAsync(dc, hc, bytes, cudaMemcpyHostToDevice, st[s]));
        scale_work<<<(n + 255) / 256, 256, 0, st[s]>>>(dc, n, 1.0001f, 64 + 32 * s);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(hc, dc, bytes, cudaMemcpyDeviceToHost, st[s]));
      }
      if (s == 0) CK(cudaEventRecord(ev, st[0]));
      nvtxRangePop();
    }
    nvtxMarkA("all streams enqueued");
    if (it % 2 == 1) {
      nvtxRangePushA("pageable copies");
      CK(cudaMemcpy(dpage, pageable, bytes, cudaMemcpyHostToDevice));            // sync, pageable
      CK(cudaMemcpyAsync(pageable, dpage, bytes, cudaMemcpyDeviceToHost, st[1]));  // "async" but pageable
      nvtxRangePop();
    }
    nvtxRangePushA("os runtime");
    usleep(2000);
    nvtxRangePop();
    CK(cudaDeviceSynchronize());
    nvtxRangePop();
  }

  // unified memory phase
  nvtxRangeId_t um = nvtxRangeStartA("um_phase");
  nvtxRangePushA("unified memory");
  const size_t un = (64u << 20) / sizeof(float);
  float* m;
  CK(cudaMallocManaged(&m, un * sizeof(float)));
  nvtxRangePushA("um cpu first touch");
  for (size_t i = 0; i < un; ++i) m[i] = 1.0f;
  nvtxRangePop();
  nvtxRangePushA("um gpu touch 1");
  um_touch<<<264, 256, 0, st[0]>>>(m, un, 1.0f);
  CK(cudaStreamSynchronize(st[0]));
  nvtxRangePop();
  nvtxRangePushA("um cpu read back");
  double sum = 0;
  for (size_t i = 0; i < un; i += 1024) sum += m[i];
  nvtxRangePop();
  nvtxRangePushA("um gpu touch 2");
  um_touch<<<264, 256, 0, st[1]>>>(m, un, 2.0f);
  CK(cudaStreamSynchronize(st[1]));
  nvtxRangePop();
  nvtxRangePop();
  nvtxRangeEnd(um);

  nvtxRangePushA("main file io");
  file_io("/tmp/ks_multistream_main.bin", 8 << 20);
  nvtxRangePop();
  pthread_join(th, nullptr);

  printf("multistream: %d iterations x %d streams x %d chunks; um sum %.1f (expect %.1f); worker read %ld bytes\n",
         iters, NS, chunks, sum, 2.0 * (un / 1024), g_bytes);
  CK(cudaFree(m));
  for (int s = 0; s < NS; ++s) { CK(cudaFreeHost(h[s])); CK(cudaFree(d[s])); CK(cudaStreamDestroy(st[s])); }
  CK(cudaFree(dpage));
  free(pageable);
  CK(cudaEventDestroy(ev));
  return 0;
}
