// A libtorch program the tests profile with `xprof run` and patch with `xrewrite`: a token mixer
// whose permuted activations feed four consumers that copy them again (worth one conversion), a
// conversion before a matmul, and a weight transposed once before the loop and read at each step.
// Prints a checksum of every step's result, exact to the last bit, for comparing builds.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <torch/types.h> // torch::Tensor and the ops, without the whole C++ frontend: Clang and
#include <torch/utils.h> // g++ parse the tests' many copies of it in half the time

namespace {

torch::Tensor mix(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& v,
                  const torch::Tensor& ut) {
  auto channels = x.permute({2, 0, 1});
  auto probs = channels.softmax(-1);
  auto logp = channels.log_softmax(-1);
  auto mixed = torch::matmul(channels, w);
  auto gated = torch::matmul(channels, v.narrow(1, 0, 256));
  auto vc = v.t().contiguous();
  auto proj = torch::mm(vc, w);
  auto head = torch::mm(w, ut);
  return probs.sum() + logp.sum() + mixed.sum() + gated.sum() + proj.sum() + head.sum();
}

} // namespace

int main(int argc, char** argv) {
  int steps = 4;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--fail")) {
      return 3; // for the tests: a program that fails
    } else {
      std::fprintf(stderr, "mixer: error: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  torch::manual_seed(0);
  auto x = torch::randn({16, 256, 128});
  auto w = torch::randn({256, 256});
  auto v = torch::randn({256, 512});
  auto u = torch::randn({64, 256});
  auto ut = u.t();
  double checksum = 0;
  for (int i = 0; i < steps; ++i)
    checksum += mix(x + i, w, v, ut).item<double>();
  std::uint64_t bits = 0;
  std::memcpy(&bits, &checksum, sizeof bits);
  std::printf("checksum %.17g (0x%016llx)\n", checksum, static_cast<unsigned long long>(bits));
  return 0;
}
