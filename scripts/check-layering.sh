#!/usr/bin/env bash
# Fails (exit 1) when a folder includes the headers of a part it may not depend on. The tools
# (profiler/ xprof, costfit/ xcost, scheduler/ xsched, rewriter/ xrewrite) stand side by side
# over the shared libraries and never include one another. Run by the test suite; the same rule
# holds for the link lines (CMakeLists.txt), which only name the libraries allowed here.
set -euo pipefail
cd "$(dirname "$0")/.."

# folder -> the parts its sources may include (xalloc/<part>/...; "common" is xalloc/*.h).
declare -A allowed=(
  [common]="common"
  [formats]="common formats"
  [memplan]="common formats memplan"
  [costfit]="common formats costfit"
  [scheduler]="common formats costfit memplan scheduler" # costfit: the cost model
  [runtime]="common runtime"
  [torchscript_pass]="common formats tspass"
  [cppsource]="common formats cppsource"
  [profiler]="common formats tspass runtime cppsource profiler"
  [rewriter]="common formats tspass runtime cppsource rewriter"
)

# The tools' folders and the name of their headers' part.
declare -A own=([profiler]=profiler [costfit]=costfit [scheduler]=scheduler [rewriter]=rewriter)

bad=0
for folder in "${!allowed[@]}"; do
  while IFS= read -r hit; do
    file=${hit%%:*}
    header=$(sed -E 's/.*#include "xalloc\/([^"]+)".*/\1/' <<<"$hit")
    part=common
    [[ $header == */* ]] && part=${header%%/*}
    if [[ " ${allowed[$folder]} " != *" $part "* ]]; then
      echo "$file: error: $folder/ may not include xalloc/$header ($part/ is not below it)"
      bad=1
    elif [[ $header == */tool.h && $part != "${own[$folder]:-}" ]]; then
      # A tool's command-line side (its Options and run) is its own, even where its library
      # is shared (xsched uses costfit's cost model, never xcost).
      echo "$file: error: $folder/ may not include xalloc/$header (another tool's command line)"
      bad=1
    fi
  done < <(grep -rn --include='*.cpp' --include='*.h' --include='*.cu' '#include "xalloc/' "$folder" || true)
done
[[ $bad -eq 0 ]] && echo "check-layering: clean"
exit $bad
