#!/usr/bin/env bash
# Fails (exit 1) when a folder includes the headers of a part it may not depend on, or links a
# library of one (target_link_libraries in its CMakeLists.txt files). The tools (profiler/ xprof,
# costfit/ xcost, scheduler/ xsched, rewriter/ xrewrite) stand side by side over the shared
# libraries and never include one another's command line (their tool.h). Run by the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

# folder -> the parts its sources may include (xalloc/<part>/...; "common" is xalloc/*.h).
# scheduler/ may include costfit/'s cost model (xalloc_costmodel), never xcost's tool.h.
# runtime/ stands on common/ alone (the arena's best-fit allocator is common's, below memplan/).
allowed='
common: common
formats: common formats
memplan: common formats memplan
costfit: common formats costfit
scheduler: common formats costfit memplan scheduler
runtime: common runtime
tspass: common formats tspass runtime
cppsource: common formats cppsource
profiler: common formats tspass runtime cppsource profiler
rewriter: common formats tspass runtime cppsource rewriter
'
folders=$(awk -F: 'NF == 2 {print $1}' <<<"$allowed")
# shellcheck disable=SC2086
grep -rnH --include='*.cpp' --include='*.h' --include='*.cu' '#include "xalloc/' $folders |
  awk -v allowed="$allowed" '
    BEGIN {
      n = split(allowed, lines, "\n")
      for (i = 1; i <= n; ++i)
        if (split(lines[i], kv, ": ") == 2) ok[kv[1]] = " " kv[2] " "
      own["profiler"] = "profiler"; own["costfit"] = "costfit"
      own["scheduler"] = "scheduler"; own["rewriter"] = "rewriter"
    }
    {
      file = $0; sub(/:.*/, "", file)
      folder = file; sub(/\/.*/, "", folder)
      header = $0; sub(/.*#include "xalloc\//, "", header); sub(/".*/, "", header)
      part = "common"
      if (index(header, "/")) { part = header; sub(/\/.*/, "", part) }
      if (index(ok[folder], " " part " ") == 0) {
        printf "%s: error: %s/ may not include xalloc/%s (%s/ is not below it)\n", file, folder, header, part
        bad = 1
      } else if (header ~ /\/tool\.h$/ && part != own[folder]) {
        printf "%s: error: %s/ may not include xalloc/%s (another tool'"'"'s command line)\n", file, folder, header
        bad = 1
      }
    }
    END { exit bad }'

# The link lines: every xalloc library a folder links (xalloc::name or xalloc_name) is one that a
# folder it may depend on defines (add_library). Statements are joined up to their ")".
# shellcheck disable=SC2086
find $folders -name CMakeLists.txt | sort | xargs awk -v allowed="$allowed" '
  BEGIN {
    n = split(allowed, lines, "\n")
    for (i = 1; i <= n; ++i)
      if (split(lines[i], kv, ": ") == 2) ok[kv[1]] = " " kv[2] " "
  }
  function partOf(folder) { return folder }
  {
    folder = FILENAME; sub(/\/.*/, "", folder)
    line = $0; sub(/#.*/, "", line)
    if (line ~ /add_library\((xalloc::|xalloc_)/) {
      name = line; sub(/.*add_library\(/, "", name); sub(/[ )].*/, "", name)
      defined[name] = partOf(folder)
    }
    if (line ~ /target_link_libraries\(/) { stmt = ""; file[++nstmt] = FILENAME; collecting = 1 }
    if (collecting) {
      stmt = stmt " " line
      if (line ~ /\)/) { links[nstmt] = stmt; collecting = 0 }
    }
  }
  END {
    for (i = 1; i <= nstmt; ++i) {
      folder = file[i]; sub(/\/.*/, "", folder)
      s = links[i]; sub(/^[^(]*\([ ]*[^ ]+/, "", s) # drop the target being linked
      m = split(s, words, /[ ()]+/)
      for (j = 1; j <= m; ++j) {
        w = words[j]
        if (w !~ /^(xalloc::|xalloc_)/ || !(w in defined)) continue
        if (index(ok[folder], " " defined[w] " ") == 0) {
          printf "%s: error: %s/ may not link %s (%s/ is not below it)\n", file[i], folder, w, defined[w]
          bad = 1
        }
      }
    }
    exit bad
  }'
echo "check-layering: clean (includes and link lines)"
