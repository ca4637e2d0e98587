#!/usr/bin/env bash
# A commit message's habits (pre-commit's commit-msg stage; .pre-commit-config.yaml): a subject
# of at most 72 characters, and, when there is a body, a blank line between them.
#   bash scripts/check-commit-msg.sh .git/COMMIT_EDITMSG
set -euo pipefail
msg=${1:?usage: check-commit-msg.sh FILE}
subject=$(grep -v '^#' "$msg" | head -1)
second=$(grep -v '^#' "$msg" | sed -n 2p)
if [[ -z $subject ]]; then
  echo "$msg:1: error: the subject is empty" >&2
  exit 1
fi
if ((${#subject} > 72)); then
  echo "$msg:1: error: the subject is ${#subject} characters, at most 72: $subject" >&2
  exit 1
fi
if [[ -n $second ]]; then
  echo "$msg:2: error: a blank line goes between the subject and the body" >&2
  exit 1
fi
