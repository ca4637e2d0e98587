// verifyOutputs (verify_outputs.h): the original and the rewritten model run on the same inputs.
#include "verify_outputs.h"

#include "noise_verdict.h"

#include <optional>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "xalloc/error.h"
#include "xalloc/tool.h"
#include "xalloc/tspass/graph_utils.h"
#include "xalloc/tspass/inputs.h"
#include "xalloc/tspass/layer_noise.h"
#include "xalloc/tspass/model_io.h"
#include "xalloc/tspass/value_compare.h"

namespace xalloc::rewriter {

namespace {

// Fresh inputs of the same shapes as `fixed`: floating-point tensors drawn again around the
// same mean and spread (seeded); integers, booleans and other values kept, as they may be indices
// or flags.
std::vector<c10::IValue> freshLike(const std::vector<c10::IValue>& fixed, std::uint64_t seed) {
  std::vector<c10::IValue> out;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& v : fixed) {
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_floating_point() &&
        v.toTensor().numel() > 1) {
      const at::Tensor& t = v.toTensor();
      at::Tensor r = at::empty_like(t).normal_(0, 1, gen);
      const at::Tensor d = t.to(at::kDouble);
      out.emplace_back((r * d.std().item<double>() + d.mean().item<double>()).to(t.dtype()));
    } else {
      out.push_back(v);
    }
  }
  return out;
}

// The channels-last format of a float tensor of 4 or 5 dimensions (channels_last_3d for 5).
std::optional<at::MemoryFormat> channelsLastOf(const at::Tensor& t) {
  if (!t.defined() || !t.is_floating_point() || (t.dim() != 4 && t.dim() != 5))
    return std::nullopt;
  return t.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
}

// The original as `model.to(memory_format=torch.channels_last)` makes it: each 4-D and 5-D
// parameter channels-last (in place). Returns how many were.
int toChannelsLast(torch::jit::Module& m) {
  int n = 0;
  for (at::Tensor p : m.parameters()) {
    const auto format = channelsLastOf(p);
    if (format && !p.is_contiguous(*format)) {
      p.set_data(p.detach().contiguous(*format));
      ++n;
    }
  }
  return n;
}

// Its 4-D and 5-D float inputs channels-last too, as the same tutorial makes them.
std::vector<c10::IValue> channelsLastInputs(const std::vector<c10::IValue>& given) {
  std::vector<c10::IValue> out;
  for (const c10::IValue& v : given) {
    const auto format = v.isTensor() ? channelsLastOf(v.toTensor()) : std::nullopt;
    out.push_back(format ? c10::IValue(v.toTensor().contiguous(*format)) : v);
  }
  return out;
}

} // namespace

// Runs `method` of the model at `a` and the rewritten one (`b_bytes`, to be written to `b`) on
// the same inputs and compares their outputs: bit for bit when `tolerance` is 0, else within it
// (and, `within_noise`, within float32's own noise: formats::noiseBound of what one ulp of the
// inputs or at each layer, PyTorch's own channels-last or freezing alone moves the original's).
// Inputs: `runs` seeded example inputs (the profile's and fresh ones), or the `fixed` inputs (read
// from `fixed_file`) and `runs` fresh inputs of the same shapes.
Verified verifyOutputs(const std::string& a, const std::string& b_bytes, const std::string& b,
                       const std::string& method, const std::vector<formats::InputSpec>& specs,
                       int runs, const std::vector<c10::IValue>* fixed,
                       const std::string& fixed_file, double tolerance, bool froze,
                       bool within_noise) {
  auto ma = tspass::loadModel(a);
  auto mb = tspass::loadModelBytes(b_bytes, b);
  std::optional<tspass::LoadedModel> frozen;  // the original frozen alone, made when needed
  std::optional<tspass::LoadedModel> layered; // with one ulp more at each layer, when needed
  int layers = 0;
  std::optional<tspass::LoadedModel> channels_last; // ATen's channels-last, when needed
  int converted = 0;                                // its parameters made so
  Verified v;
  const int total = fixed ? runs + 1 : runs;
  for (int i = 0; i < total; ++i) {
    auto inputsFor = [&]() {
      if (!fixed)
        return xalloc::tspass::makeInputs(specs, static_cast<std::uint64_t>(i));
      return i == 0 ? *fixed : freshLike(*fixed, static_cast<std::uint64_t>(i));
    };
    const std::vector<c10::IValue> given = inputsFor();
    // What these inputs are, for the messages.
    const std::string on = !fixed   ? "example inputs with seed " + std::to_string(i)
                           : i == 0 ? "the inputs of " + fixed_file
                                    : "fresh inputs shaped like those of " + fixed_file +
                                          " (seed " + std::to_string(i) + ")";
    auto run = [&](tspass::LoadedModel& m, const std::vector<c10::IValue>& with) {
      auto inputs = xalloc::tspass::methodInputs(m.module, method, with, m.path);
      inputs.erase(inputs.begin()); // the method call supplies self
      return m.module.get_method(method)(std::move(inputs));
    };
    // A model that raises says which one, on what, and the error itself (InputError, exit 2).
    auto runOrSay = [&](tspass::LoadedModel& m, const char* which) {
      try {
        return run(m, given);
      } catch (const InputError&) {
        throw;
      } catch (const std::exception& e) {
        throw InputError(a, std::string(which) + " fails on " + on + ": " + firstLine(e.what()) +
                                "; nothing was written");
      }
    };
    c10::IValue out_a = runOrSay(ma, "the original model");
    c10::IValue out_b = runOrSay(mb, "the rewritten model");
    v.constant_outputs = (i == 0 || v.constant_outputs) && tspass::constantFloatOutputs(out_a);
    v.elements += tspass::tensorElements(out_a);
    const bool same_bits = tspass::bitwiseEqual(out_a, out_b);
    const double e = same_bits ? 0.0 : tspass::maxRelativeError(out_a, out_b);
    bool bad = !formats::withinTolerance(same_bits, e, tolerance);
    double counted = e; // the error this input counts for
    if (bad && tolerance > 0 && within_noise) {
      // Judged beside what the original's own outputs already move by (the references): its
      // inputs one ulp away (float32 rounding; two draws), and freezing alone (torch.jit.freeze
      // folds batch norms). A rewrite within formats::noiseBound of them adds float32's own
      // noise and nothing else.
      std::vector<NoiseReference> refs;
      for (std::uint64_t draw = 0; draw < 2; ++draw)
        refs.push_back(
            {run(ma, tspass::oneUlpAway(given, 2 * static_cast<std::uint64_t>(i) + draw)),
             kInputUlp});
      // And another summation order: each layer's output moved one ulp (layer_noise.h), on the
      // model as it was rewritten (frozen when the rewrite froze it).
      if (!layered) {
        layered = tspass::loadModel(a);
        if (froze)
          tspass::freezeModel(*layered, method);
        layers = tspass::moveLayerOutputsOneUlp(*tspass::inlineMethod(layered->module, method));
      }
      if (layers > 0)
        refs.push_back({run(*layered, given), kLayerUlp});
      // And ATen's own: the original channels-last, as a user makes it in one line (a kernel
      // that sums in another order moves a deep detector's outputs by several ulps a layer,
      // more than one ulp at each layer says).
      if (!channels_last) {
        channels_last = tspass::loadModel(a);
        converted = toChannelsLast(channels_last->module);
      }
      if (converted > 0) {
        try {
          refs.push_back({run(*channels_last, channelsLastInputs(given)), kChannelsLast});
        } catch (const std::exception&) {
          converted = 0; // a model that will not run so is judged beside the others
        }
      }
      std::optional<c10::IValue> alone;
      if (froze) {
        if (!frozen) {
          frozen = tspass::loadModel(a);
          tspass::freezeModel(*frozen, method);
        }
        alone = run(*frozen, given);
      }
      const NoiseVerdict n = judgeBesideNoise(out_a, out_b, e, tolerance, refs, alone);
      if (n.within) {
        bad = false;
        counted = n.counted;
        v.unordered = v.unordered || n.unordered;
        if (n.bound >= v.bound) {
          v.bound = n.bound;
          v.bound_why = n.why;
        }
      }
    }
    v.error = std::max(v.error, counted);
    v.same_bits = v.same_bits && same_bits;
    if (bad) {
      const c10::IValue again = run(ma, given);
      const bool same_again = tspass::bitwiseEqual(out_a, again);
      if (!formats::withinTolerance(
              same_again, same_again ? 0.0 : tspass::maxRelativeError(out_a, again), tolerance)) {
        v.problem = "the original model itself gives different outputs on two runs of the same "
                    "inputs, so no rewrite can be verified; --no-verify skips the check";
        return v;
      }
      v.problem = "on " + on;
      return v;
    }
  }
  return v;
}

} // namespace xalloc::rewriter
