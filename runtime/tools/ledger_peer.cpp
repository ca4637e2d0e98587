// xalloc-ledger-peer: a second process for the ledger tests. Opens a ledger-backed simulated
// device and, by mode:
//   hold NAME CAPACITY BYTES MS   allocate BYTES, print "held", wait MS, print "released <ns>"
//                                 (steady clock, just before the free), free, exit
//   cache NAME CAPACITY BYTES     allocate and free BYTES into the device's cache, print
//                                 "cached", answer release requests until the cache is empty,
//                                 print "released <ns>", exit
//   forever NAME CAPACITY BYTES   allocate BYTES, print "held", sleep until killed
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "xalloc/runtime/allocator.h"
#include "xalloc/runtime/ledger.h"

using namespace xalloc::runtime;

namespace {
long long nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s hold|cache|forever NAME CAPACITY BYTES [MS]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1], name = argv[2];
  const long long capacity = std::atoll(argv[3]);
  const auto bytes = static_cast<std::size_t>(std::atoll(argv[4]));
  auto ledger = Ledger::open(name, capacity);
  auto device = std::make_shared<SimulatedDevice>(static_cast<std::size_t>(capacity), ledger);
  if (mode == "cache") {
    device->cacheFrees(true);
    Stack stack = makeStack(device, RetryConfig{}, ledger);
    void* p = stack.top->allocate(bytes);
    if (!p)
      return 3;
    stack.top->deallocate(p, bytes);
    std::printf("cached\n");
    std::fflush(stdout);
    for (int i = 0; i < 20000 && device->cached() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    std::printf("released %lld\n", nowNs());
    std::fflush(stdout);
    ledger->stopResponder();
    return device->cached() == 0 ? 0 : 4;
  }
  void* p = device->allocate(bytes);
  if (!p)
    return 3;
  std::printf("held\n");
  std::fflush(stdout);
  if (mode == "forever") {
    while (true)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(argc > 5 ? std::atoi(argv[5]) : 100));
  std::printf("released %lld\n", nowNs());
  std::fflush(stdout);
  device->deallocate(p, bytes);
  return 0;
}
