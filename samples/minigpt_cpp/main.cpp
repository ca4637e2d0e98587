// minigpt_cpp: trains MinimalGPT (minigpt.h) on synthetic counting sequences, then times a few
// inference steps. Usage: minigpt_cpp [--steps N] [--batch B] [--seq T] [--eval-iters N]
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <string>

#include "minigpt.h"

namespace {

struct Args {
  int64_t steps = 20;
  int64_t batch = 4;
  int64_t seq = 64;
  int64_t eval_iters = 5;
};

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) -> int64_t {
      if (i + 1 >= argc) {
        std::cerr << "minigpt_cpp: error: " << flag << " needs a value\n";
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (!std::strcmp(argv[i], "--steps"))
      a.steps = next("--steps");
    else if (!std::strcmp(argv[i], "--batch"))
      a.batch = next("--batch");
    else if (!std::strcmp(argv[i], "--seq"))
      a.seq = next("--seq");
    else if (!std::strcmp(argv[i], "--eval-iters"))
      a.eval_iters = next("--eval-iters");
    else {
      std::cerr << "minigpt_cpp: error: unknown argument '" << argv[i] << "'\n"
                << "usage: minigpt_cpp [--steps N] [--batch B] [--seq T] [--eval-iters N]\n";
      std::exit(2);
    }
  }
  return a;
}

} // namespace

int main(int argc, char** argv) {
  Args args = parseArgs(argc, argv);
  torch::manual_seed(1234);
  minigpt::Config cfg;
  if (args.seq > cfg.block_size) {
    std::cerr << "minigpt_cpp: error: --seq must be at most " << cfg.block_size << "\n";
    return 2;
  }
  minigpt::MinimalGPT model(cfg);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(3e-3));

  for (int64_t step = 0; step < args.steps; ++step) {
    // Sequences that count upwards modulo the vocabulary: next-token prediction is learnable.
    auto start = torch::randint(0, cfg.vocab_size, {args.batch, 1}, torch::kLong);
    auto seq = (start + torch::arange(args.seq + 1, torch::kLong)).remainder(cfg.vocab_size);
    auto x = seq.narrow(1, 0, args.seq).contiguous();
    auto y = seq.narrow(1, 1, args.seq).contiguous();
    auto logits = model->forward(x);
    auto loss =
        torch::nn::functional::cross_entropy(logits.reshape({-1, cfg.vocab_size}), y.reshape({-1}));
    opt.zero_grad();
    loss.backward();
    opt.step();
    if (step % 10 == 0 || step == args.steps - 1)
      std::cout << "step " << step << "  loss " << std::setprecision(9) << loss.item<float>()
                << "\n";
  }

  torch::NoGradGuard no_grad;
  model->eval();
  auto idx = torch::randint(0, cfg.vocab_size, {args.batch, args.seq}, torch::kLong);
  double total_ms = 0;
  for (int64_t i = 0; i < args.eval_iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto logits = model->forward(idx);
    total_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  if (args.eval_iters > 0)
    std::cout << "inference: " << total_ms / static_cast<double>(args.eval_iters)
              << " ms per forward\n";
  return 0;
}
