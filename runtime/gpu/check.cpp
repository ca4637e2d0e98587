// xalloc-gpu-check: the async conversion runtime's CUDA backend, checked on a GPU.
//
// Run directly and under compute-sanitizer (memcheck, racecheck, synccheck): scripts/gpu-check.sh
// does both on a GPU machine. Exit 0 when every check passes, 1 when one fails, 77 (CTest's
// "skipped") when there is no CUDA device. No test framework: the GPU machines have none.
//
// What it checks, each against ATen's .contiguous() bit for bit:
//   - the tiled kernel on 1-, 2-, 4- and 8-byte elements, partial tiles, batches with gaps,
//     storage offsets, random bit patterns (NaN payloads included), the sync op's fallbacks;
//   - contiguous_async orders itself after the producer's work (the producer's stream is kept
//     busy by a spin kernel, then writes the input: a copy that did not wait reads stale data);
//   - a consumer's stream waits for the copy (a consumer on another, idle stream reads the
//     output right after wait(), while the copy is held back by the producer);
//   - the runtime keeps inputs and outputs alive while the copy may run: the caller drops its
//     only reference at once and the producer's stream allocates and overwrites memory
//     meanwhile; the runtime counts them in flight until the completion event;
//   - many conversions in flight at once, on the fixed set of side streams;
//   - the TorchScript ops in a graph on CUDA tensors;
//   - the graceful stack over the CUDA caching allocator: a request the device cannot hold is an
//     OutOfMemory exception carrying the stats (the process goes on and allocates again), and
//     emptyCache() gives cached blocks back to the driver.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/cuda.h>

#include "../src/cuda_async.h"
#include "xalloc/runtime/async.h"
#include "xalloc/runtime/install.h"
#include "xalloc/runtime/stack.h"

using namespace xalloc::runtime;

namespace {

int g_failed = 0;

// Under compute-sanitizer (scripts/gpu-check.sh sets XALLOC_GPU_CHECK_TOOL), kernels run
// serialized and slowly: checks that assume a copy is still running are skipped. memcheck runs
// without the caching allocator (nothing to empty) and reports every failed cudaMalloc as an
// error, so the deliberate out-of-memory is skipped there too.
std::string sanitizer() {
  const char* t = std::getenv("XALLOC_GPU_CHECK_TOOL");
  return t ? t : "";
}

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  g_failed += !ok;
}

// Both on the host, contiguous, compared byte for byte.
bool sameBits(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor x = a.cpu().contiguous(), y = b.cpu().contiguous();
  return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), static_cast<std::size_t>(x.nbytes())) == 0;
}

// Random bits of any dtype (NaN payloads and denormals included for floating types).
at::Tensor randomBits(at::IntArrayRef sizes, at::ScalarType dtype) {
  const auto item = c10::elementSize(dtype);
  std::vector<std::int64_t> bytes(sizes.begin(), sizes.end());
  bytes.push_back(static_cast<std::int64_t>(item));
  at::Tensor raw = at::randint(0, 256, bytes, at::TensorOptions().dtype(at::kByte));
  return raw.view(dtype).squeeze(-1).cuda();
}

void kernelLayouts() {
  struct Case {
    std::string name;
    std::function<at::Tensor()> make;
  };
  const std::vector<Case> cases = {
      {"float32 [4096,4096].t()",
       [] {
         return randomBits({4096, 4096}, at::kFloat).t();
       }},
      {"float32 [1000,37].t() (partial tiles)",
       [] {
         return randomBits({1000, 37}, at::kFloat).t();
       }},
      {"float16 [64,197,64].transpose(1,2)",
       [] {
         return randomBits({64, 197, 64}, at::kHalf).transpose(1, 2);
       }},
      {"bfloat16 [12,31,33].transpose(1,2)",
       [] {
         return randomBits({12, 31, 33}, at::kBFloat16).transpose(1, 2);
       }},
      {"float64 [2048,1024].t()",
       [] {
         return randomBits({2048, 1024}, at::kDouble).t();
       }},
      {"uint8 [513,257].t()",
       [] {
         return randomBits({513, 257}, at::kByte).t();
       }},
      {"int64 [3,100,5,70].permute(0,2,3,1) (merged to a batched transpose)",
       [] {
         return randomBits({3, 100, 5, 70}, at::kLong).permute({0, 2, 3, 1});
       }},
      {"batch stride with gaps: [8,64,70] transposes 5000 elements apart",
       [] {
         return randomBits({8 * 5000}, at::kFloat).as_strided({8, 64, 70}, {5000, 1, 64});
       }},
      {"storage offset: [50,300,200][7].t()",
       [] {
         return randomBits({50, 300, 200}, at::kFloat).select(0, 7).t();
       }},
      {"65536 batches of [3,5].t() (grid-stride loop)",
       [] {
         return randomBits({65536, 5, 3}, at::kFloat).transpose(1, 2);
       }},
  };
  for (const auto& c : cases) {
    const at::Tensor x = c.make();
    const bool fast = hasFastKernel(x);
    const at::Tensor y = contiguousFast(x);
    check(fast && y.is_contiguous() && sameBits(y, x.contiguous()), "kernel: " + c.name);
    at::Tensor into = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    contiguousInto(x, into);
    check(sameBits(into, x.contiguous()), "contiguousInto: " + c.name);
  }
  // Layouts the kernel does not take go to ATen, with the same result.
  const at::Tensor p = randomBits({4, 6, 8, 10}, at::kFloat).permute({3, 1, 0, 2});
  check(!hasFastKernel(p) && sameBits(contiguousFast(p), p.contiguous()),
        "fallback: a 4-D permutation goes to ATen");
  const at::Tensor c = at::randn({64, 64}, at::kCUDA);
  check(contiguousFast(c).is_same(c), "a contiguous input is returned as it is");
}

void ordersAfterTheProducer() {
  // The producer's stream is busy spinning, then writes x. A copy that did not wait for the
  // producer's event would read x before that write.
  at::Tensor x = at::zeros({2048, 2048}, at::kCUDA);
  torch::cuda::synchronize();
  at::cuda::sleep(50 * 1000 * 1000); // ~25-50 ms of spinning on the current stream
  x.fill_(3.0);
  AsyncHandle h = contiguousAsync(x.t());
  const bool in_flight = cuda::inFlight() >= 1;
  at::Tensor y = h.wait();
  check(sameBits(y, at::full({2048, 2048}, 3.0, at::kCUDA)),
        "async: the copy waits for the producer");
  if (sanitizer().empty())
    check(in_flight, "async: the conversion is held in flight while the producer still runs");
  torch::cuda::synchronize();
  bool drained = false;
  for (int i = 0; i < 200 && !drained; ++i) {
    drained = cuda::inFlight() == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  check(drained, "async: the runtime drops what it held once the completion event has passed");
}

void consumerWaits() {
  // The producer's stream spins, so the side stream's copy starts late; the consumer waits on
  // another stream that is idle. Without the consumer's stream wait it would read the output
  // before the copy wrote it. Waiting on another stream than the producer's also exercises the
  // record_stream fallback for the output block.
  at::Tensor src = randomBits({3000, 1000}, at::kHalf);
  const at::Tensor expected = src.t().contiguous();
  torch::cuda::synchronize();
  at::cuda::sleep(50 * 1000 * 1000);
  AsyncHandle h = contiguousAsync(src.t());
  const c10::cuda::CUDAStream other = c10::cuda::getStreamFromPool();
  at::Tensor y;
  {
    c10::cuda::CUDAStreamGuard g(other);
    y = h.wait().clone(); // a consumer kernel on the other stream
    other.synchronize();  // y is read below on the current stream, which knows nothing of other
  }
  check(sameBits(y, expected), "async: a consumer on another stream waits for the copy");
}

void keepsInputsAlive() {
  std::vector<at::Tensor> sources, expected;
  for (int i = 0; i < 16; ++i) {
    sources.push_back(randomBits({1024, 777}, at::kFloat));
    expected.push_back(sources.back().t().contiguous());
  }
  torch::cuda::synchronize();
  at::cuda::sleep(50 * 1000 * 1000); // nothing below runs on the GPU before the loop ends
  std::vector<AsyncHandle> handles;
  for (int i = 0; i < 16; ++i) {
    handles.push_back(contiguousAsync(sources[i].t()));
    sources[i].reset(); // the caller's only reference, dropped before the copy can have started
    // The producer allocates and overwrites memory: a freed input block would be reused here.
    at::Tensor noise = at::full({1024, 777}, -1.0f, at::kCUDA);
  }
  if (sanitizer().empty())
    check(cuda::inFlight() >= 16, "keep-alive: 16 conversions held while the GPU is busy");
  bool all = true;
  for (std::size_t i = 0; i < handles.size(); ++i)
    all = all && sameBits(handles[i].wait(), expected[i]);
  check(all, "keep-alive: 16 conversions in flight at once, inputs dropped by the caller");
}

void torchScriptOps() {
  check(loadOps() >= 2 && torch::jit::findOperatorFor(
                              c10::OperatorName("xalloc::contiguous_async", "")) != nullptr,
        "TorchScript: the xalloc:: ops registered");
  auto graph = std::make_shared<torch::jit::Graph>();
  torch::jit::parseIR(R"IR(
graph(%x : Tensor):
  %0 : int = prim::Constant[value=0]()
  %1 : int = prim::Constant[value=1]()
  %t : Tensor = aten::transpose(%x, %0, %1)
  %f : Future(Tensor) = xalloc::contiguous_async(%t)
  %s : Tensor = xalloc::contiguous(%t)
  %c : Tensor = aten::wait(%f)
  %two : int = prim::Constant[value=2]()
  %m : Tensor = aten::mul(%c, %two)
  return (%m, %s))IR",
                      graph.get());
  torch::jit::GraphExecutor exec(graph, "gpu_check");
  const at::Tensor x = at::randn({777, 513}, at::kCUDA);
  torch::cuda::synchronize();
  // The producer's stream is busy, so the side stream's copy runs late: the consumer (aten::mul
  // after aten::wait) must still see its result.
  at::cuda::sleep(50 * 1000 * 1000);
  torch::jit::Stack stack{x};
  exec.run(stack);
  check(sameBits(stack[0].toTensor(), x.t().contiguous() * 2) &&
            sameBits(stack[1].toTensor(), x.t().contiguous()),
        "TorchScript: contiguous_async + aten::wait (joined at launch) and contiguous on CUDA");
}

void gracefulCudaStack() {
  RetryConfig config;
  config.backoff = false;
  config.ask_peers = false;
  config.deadline_ms = 500;
  auto backend = makeCudaCachingBackend(0);
  Stack stack = makeStack(backend, config);
  constexpr std::size_t kMiB = 1 << 20;
  void* p = stack.top->allocate(kMiB);
  check(p != nullptr && cudaMemset(p, 7, kMiB) == cudaSuccess,
        "graceful CUDA: 1 MiB through the stack, written by the device");
  if (sanitizer() == "memcheck") {
    stack.top->deallocate(p, kMiB);
    return;
  }
  std::size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  bool threw = false;
  std::string message;
  try {
    stack.top->allocate(2 * total);
  } catch (const OutOfMemory& e) {
    threw = true;
    message = e.what();
  }
  check(threw && !message.empty(),
        "graceful CUDA: twice the device's memory is OutOfMemory, not an abort: " +
            message.substr(0, 120));
  void* q = stack.top->allocate(kMiB);
  check(q != nullptr, "graceful CUDA: the stack allocates again after the OutOfMemory");
  stack.top->deallocate(p, kMiB);
  stack.top->deallocate(q, kMiB);
  auto snap = stack.stats->snapshot();
  check(snap["allocation.all.current"] == 0 && snap["num_ooms"] == 1,
        "graceful CUDA: stats count 0 live blocks and 1 OutOfMemory");
  {
    at::Tensor big = at::empty({256 * static_cast<std::int64_t>(kMiB)}, at::kCUDA); // 1 GiB
    big.fill_(1.0f);
    torch::cuda::synchronize();
  } // freed into the caching allocator's cache
  const std::size_t released = backend->emptyCache();
  check(released >= 512 * kMiB, "graceful CUDA: emptyCache() gave " +
                                    std::to_string(released / kMiB) +
                                    " MiB back to the driver (>= 512 expected)");
}

} // namespace

int main() {
  if (!torch::cuda::is_available()) {
    std::printf("skipped: no CUDA device here (the CUDA checks run on a GPU machine: "
                "scripts/gpu-check.sh)\n");
    return 77;
  }
  std::printf("device: %s\n", at::cuda::getCurrentDeviceProperties()->name);
  kernelLayouts();
  ordersAfterTheProducer();
  consumerWaits();
  keepsInputsAlive();
  torchScriptOps();
  gracefulCudaStack();
  torch::cuda::synchronize();
  std::printf("%s: %d check(s) failed\n", g_failed ? "FAILED" : "passed", g_failed);
  return g_failed ? 1 : 0;
}
