// MinimalGPT in C++ libtorch (torch::nn modules): the same model as samples/minigpt/model.py.
// It is the input of x-allocator's C++ path: `xprof run -- ./minigpt_cpp` and `xrewrite` on
// this source.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include <torch/torch.h>

namespace minigpt {

struct Config {
  int64_t vocab_size = 256;
  int64_t block_size = 128;
  int64_t n_layer = 2;
  int64_t n_head = 4;
  int64_t n_embd = 128;
};

struct CausalSelfAttentionImpl : torch::nn::Module {
  explicit CausalSelfAttentionImpl(const Config& cfg)
      : n_head(cfg.n_head), n_embd(cfg.n_embd),
        c_attn(register_module("c_attn", torch::nn::Linear(cfg.n_embd, 3 * cfg.n_embd))),
        c_proj(register_module("c_proj", torch::nn::Linear(cfg.n_embd, cfg.n_embd))) {
    mask = register_buffer("mask", torch::tril(torch::ones({cfg.block_size, cfg.block_size}))
                                       .view({1, 1, cfg.block_size, cfg.block_size}));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    using torch::indexing::None;
    using torch::indexing::Slice;
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), hs = C / n_head;
    auto qkv = c_attn->forward(x).split(n_embd, 2);
    auto q = qkv[0].view({B, T, n_head, hs}).transpose(1, 2);
    auto k = qkv[1].view({B, T, n_head, hs}).transpose(1, 2);
    auto v = qkv[2].view({B, T, n_head, hs}).transpose(1, 2);
    auto att = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hs)));
    auto causal = mask.index({Slice(), Slice(), Slice(None, T), Slice(None, T)});
    att = att.masked_fill(causal == 0, -std::numeric_limits<float>::infinity());
    att = torch::softmax(att, -1);
    auto y = torch::matmul(att, v);
    y = y.transpose(1, 2).contiguous().view({B, T, C});
    return c_proj->forward(y);
  }

  int64_t n_head, n_embd;
  torch::nn::Linear c_attn, c_proj;
  torch::Tensor mask;
};
TORCH_MODULE(CausalSelfAttention);

struct MLPImpl : torch::nn::Module {
  explicit MLPImpl(const Config& cfg)
      : c_fc(register_module("c_fc", torch::nn::Linear(cfg.n_embd, 4 * cfg.n_embd))),
        c_proj(register_module("c_proj", torch::nn::Linear(4 * cfg.n_embd, cfg.n_embd))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    return c_proj->forward(torch::gelu(c_fc->forward(x)));
  }

  torch::nn::Linear c_fc, c_proj;
};
TORCH_MODULE(MLP);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Config& cfg)
      : ln_1(register_module("ln_1",
                             torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.n_embd})))),
        attn(register_module("attn", CausalSelfAttention(cfg))),
        ln_2(register_module("ln_2",
                             torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.n_embd})))),
        mlp(register_module("mlp", MLP(cfg))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = x + attn->forward(ln_1->forward(x));
    x = x + mlp->forward(ln_2->forward(x));
    return x;
  }

  torch::nn::LayerNorm ln_1;
  CausalSelfAttention attn;
  torch::nn::LayerNorm ln_2;
  MLP mlp;
};
TORCH_MODULE(Block);

struct MinimalGPTImpl : torch::nn::Module {
  explicit MinimalGPTImpl(const Config& cfg)
      : wte(register_module("wte", torch::nn::Embedding(cfg.vocab_size, cfg.n_embd))),
        wpe(register_module("wpe", torch::nn::Embedding(cfg.block_size, cfg.n_embd))),
        ln_f(register_module("ln_f",
                             torch::nn::LayerNorm(torch::nn::LayerNormOptions({cfg.n_embd})))) {
    for (int64_t i = 0; i < cfg.n_layer; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), Block(cfg)));
    for (auto& p : parameters())
      if (p.dim() >= 2)
        torch::nn::init::normal_(p, 0.0, 0.02);
  }

  // Logits for token ids `idx` [B, T]; the LM head is tied to the token embedding.
  torch::Tensor forward(const torch::Tensor& idx) {
    const int64_t T = idx.size(1);
    auto pos = torch::arange(0, T, torch::TensorOptions().dtype(torch::kLong));
    auto x = wte->forward(idx) + wpe->forward(pos);
    for (auto& block : blocks)
      x = block->forward(x);
    x = ln_f->forward(x);
    return torch::matmul(x, wte->weight.t());
  }

  torch::nn::Embedding wte, wpe;
  torch::nn::LayerNorm ln_f;
  std::vector<Block> blocks;
};
TORCH_MODULE(MinimalGPT);

} // namespace minigpt
