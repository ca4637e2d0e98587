// xcost as a function: options in a plain struct, an exit code out (see main.cpp for the flags).
#pragma once

#include <string>
#include <vector>

namespace xalloc::costfit {

struct XcostOptions {
  std::string input;  // profile.json, "-" or "" (stdin stream)
  std::string output; // cost.json, "-", or "" (stream mode)
  bool report = false;
  int folds = 5;
  std::string test;               // an independent profile to score the models on ("" = none)
  std::vector<std::string> train; // more profiles (of the same machine) to fit on
  // `xcost predict`
  bool predict = false;
  std::string cost; // cost.json for predict ("" = read the stream on stdin... not allowed)
  std::string predict_model = "auto"; // "auto", "stride" or "classic"
};

int runXcost(const XcostOptions& options);

} // namespace xalloc::costfit
