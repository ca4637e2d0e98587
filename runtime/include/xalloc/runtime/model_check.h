// Whether a loaded model's tensors fit what its file holds. libtorch 1.13 believes a model
// file's word about each tensor: a storage offset past the record (a crash when read), a record
// shorter than the storage it says (heap memory read as weights). The tools check every model
// they load, and xalloc.load(path) in Python, before anything reads a tensor.
#pragma once

#include <memory>
#include <string>

#include <caffe2/serialize/read_adapter_interface.h>

#include <torch/csrc/jit/api/module.h>

namespace xalloc::runtime {

/// "" when every tensor the module holds fits its storage: in its attributes (parameters,
/// buffers, what lists, tuples, dicts and objects hold) and in the constants of its methods'
/// code; else what is wrong with the first that does not, in one line. A storage the CPU
/// allocator holds is also checked against the block holding it (the record libtorch read).
std::string modelTensorProblem(const torch::jit::Module& m);

/// "" when the bytes `in` holds may be a TorchScript archive; else what they are instead, in one
/// line that says what to do: a torch.save file (a zip with data.pkl and no code), a pickle
/// (torch.save's legacy format), or not a zip archive at all (a truncated model, another file).
/// What the tools and xalloc.load(path) say before libtorch's reader does.
std::string modelFileProblem(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in);

} // namespace xalloc::runtime
