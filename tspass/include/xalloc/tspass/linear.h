// The weight operand `aten::linear` hides. `linear(x, W, b)` multiplies x by W.t(), a transposed
// view of W that the graph never names, so xprof could not see that BLAS reads it in a slow
// layout and xsched could not decide to make it contiguous. exposeLinearWeights writes every
// linear as the ops it is made of, `add(matmul(x, t(W)), b)`, which PyTorch computes with the
// same products summed in the same order (xprof re-runs and xrewrite verifies each one bit for
// bit): the transposed weight becomes an ordinary value with a consumer. restoreLinears puts
// back, as one `aten::linear`, every exposed linear that no decision touched, so a rewrite
// changes only the linears it converts. xprof and xrewrite expose the same way before numbering
// a graph, so ids and anchors agree.
#pragma once

#include <string>
#include <vector>

namespace torch::jit {
struct Graph;
struct Node;
struct Value;
} // namespace torch::jit

namespace xalloc::tspass {

struct ExposedLinear {
  torch::jit::Node* t = nullptr;       // aten::t(W)
  torch::jit::Node* matmul = nullptr;  // aten::matmul(x, t(W))
  torch::jit::Node* add = nullptr;     // aten::add(matmul, b); nullptr without a bias
  torch::jit::Value* bias = nullptr;   // the linear's bias operand (a tensor, or the None)
  torch::jit::Value* weight = nullptr; // W as exposed (a rewrite may store a constant W anew)
  std::string output_name;             // the linear's output name, kept for readable diffs
};

/// Rewrites every `aten::linear` whose bias is a tensor or None (not an Optional decided at run
/// time) in `graph` and its nested blocks. The new nodes keep the linear's source range and
/// inlined call stack, so they have its file:line, function, expression and module scope.
std::vector<ExposedLinear> exposeLinearWeights(torch::jit::Graph& graph);

/// A restored linear whose output had no name, only a number: TorchScript gives a new value a
/// new number and refuses numbers as names, so the restored linear prints as `now`.
struct Renumbered {
  std::string now;    // the restored linear's output, as printed ("696")
  std::string before; // the number the linear's output had ("235")
};

/// Puts back `aten::linear` for each exposed linear whose three nodes still read only each
/// other (the transposed weight not converted, the product read only by the add). A linear
/// whose input x was converted is restored reading the converted x. Returns how many; the
/// restored linears whose output was numbered are added to `renumbered` when given.
std::size_t restoreLinears(const std::vector<ExposedLinear>& exposed,
                           std::vector<Renumbered>* renumbered = nullptr);

/// `text`, a graph as graphText prints it, with each renumbered value printed under the number
/// it had before exposure (whole names only: renaming %69 leaves %696 alone). The numbers freed
/// by the destroyed linears are never given out again, so no other value can print as one.
/// Without it, a rewrite that converts nothing would still show every numbered linear as
/// changed in its diff.
std::string withOriginalNumbers(std::string text, const std::vector<Renumbered>& renumbered);

/// The exposed linear whose matmul is `matmul`; nullptr when it is not one.
const ExposedLinear* findExposed(const std::vector<ExposedLinear>& exposed,
                                 const torch::jit::Node* matmul);

} // namespace xalloc::tspass
