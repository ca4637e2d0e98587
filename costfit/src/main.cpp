// xcost command line: parses flags into XcostOptions and calls runXcost.
#include <CLI/CLI.hpp>

#include "xalloc/costfit/tool.h"
#include "xalloc/tool.h"

int main(int argc, char** argv) {
  xalloc::costfit::XcostOptions o;
  CLI::App app{"xcost: fit the conversion cost models (the classic alpha*numel + beta*ndim + "
               "gamma, and a stride-aware model per copy kernel) from a profile and report "
               "their accuracy on held-out layouts.",
               "xcost"};
  app.add_option("profile", o.input,
                 "profile.json, or '-' to read a stream of documents from stdin (default)");
  app.add_option("-o,--output", o.output,
                 "write cost.json here ('-' for stdout); without it, pass the input stream "
                 "through and append cost.json");
  app.add_flag("--report", o.report, "print the fitted coefficients and held-out errors");
  app.add_option("--folds", o.folds, "cross-validation folds (by layout)")->capture_default_str();
  app.add_option("--test", o.test,
                 "also score both models on this independent profile's measured layouts "
                 "(e.g. `xprof --sweep --seed 1`)");
  app.add_option("--train", o.train,
                 "also fit on this profile's measured layouts, e.g. a larger calibration sweep "
                 "made once per machine (`xprof --sweep --sweep-count 2400`); repeatable; it "
                 "must come from the same machine and thread count");
  auto* predict = app.add_subcommand(
      "predict",
      "read layouts as JSON Lines on stdin ({\"sizes\":[..],\"strides\":[..],"
      "\"dtype\":\"float32\",\"device\":\"cpu\"}) and print {\"ms\":..,\"model\":..} per line");
  predict->add_option("--cost", o.cost, "cost.json to predict with")->required();
  predict
      ->add_option("--model", o.predict_model,
                   "auto (measured, then stride, then classic), stride or classic")
      ->capture_default_str();
  if (auto code = xalloc::parseCommandLine(app, argc, argv))
    return *code;
  o.predict = predict->parsed();
  return xalloc::runGuarded("xcost", [&] { return xalloc::costfit::runXcost(o); });
}
