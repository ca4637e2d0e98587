#!/usr/bin/env python3
"""Which files clang-tidy must look at again: a file whose preprocessed text (the build's own
compile command with -E -P, the clone's path taken out), the repository's .clang-tidy and the
clang-tidy version are those of a run that found nothing is clean without a new run. CI builds a
fresh clone each time; the cache lives under ~/.cache, beside ccache's.

  tidy_cache.py stale BUILD_DIR TIDY FILE...   prints the files to check, one per line
  tidy_cache.py clean BUILD_DIR TIDY FILE...   records the files as clean
"""
import concurrent.futures
import hashlib
import json
import os
import shlex
import subprocess
import sys


def cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xalloc-tidy")


def commands(build):
    with open(os.path.join(build, "compile_commands.json")) as f:
        return {os.path.realpath(os.path.join(e["directory"], e["file"])): e for e in json.load(f)}


def preprocess(entry):
    args = entry.get("arguments") or shlex.split(entry["command"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        if a == "-c":
            continue
        out.append(a)
    # A ccache launcher in front is not the compiler.
    if os.path.basename(out[0]).startswith("ccache"):
        out = out[1:]
    r = subprocess.run(out + ["-E", "-P", "-o", "-"], cwd=entry["directory"],
                       capture_output=True)
    return r.stdout if r.returncode == 0 else None


def key(root, tidy_id, entry):
    text = preprocess(entry)
    if text is None:
        return None  # cannot tell: check it
    text = text.replace(root.encode(), b"")
    return hashlib.sha256(tidy_id + text).hexdigest()


def main():
    if len(sys.argv) < 4 or sys.argv[1] not in ("stale", "clean"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, build, tidy, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))
    version = subprocess.run([tidy, "--version"], capture_output=True).stdout
    with open(os.path.join(root, ".clang-tidy"), "rb") as f:
        tidy_id = version + f.read()
    cmds = commands(build)
    os.makedirs(cache_dir(), exist_ok=True)

    def one(path):
        entry = cmds.get(os.path.realpath(os.path.join(root, path)))
        return path, key(root, tidy_id, entry) if entry else None

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        keys = list(pool.map(one, files))
    for path, k in keys:
        marker = os.path.join(cache_dir(), k) if k else None
        if mode == "stale":
            if not marker or not os.path.exists(marker):
                print(path)
        elif marker:
            with open(marker, "w") as f:
                f.write(path + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
