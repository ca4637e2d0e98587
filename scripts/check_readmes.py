#!/usr/bin/env python3
"""Each folder's README names every source file in it, and names no file that does not exist.

A file is named when its folder's README.md has, in backquotes, its name, its path from the
folder, its name without the extension (`regions` for regions.h and regions.cpp), or a glob
that matches it (`rules/*.cpp`); a header and its code under the same name are named together. A name in backquotes that looks like a file
(`foo.cpp`, `src/bar.h`) must exist: from the folder, from the repository's root, or as the name
of a file somewhere in the folder. Exit 0 clean, 1 with one line per finding.

    python3 scripts/check_readmes.py [ROOT]
"""
import fnmatch
import os
import re
import sys

SOURCES = (".cpp", ".h", ".cu", ".py", ".sh", ".def")
# Folders whose README speaks for the files below them; build outputs and data are not code.
SKIP_DIRS = {".git", "build", "build-asan", "build-fuzz", "data", "corpus", "node_modules", "__pycache__"}
FILE_TOKEN = re.compile(r"`([A-Za-z0-9_./*{},-]+\.(?:cpp|h|cu|py|sh|def|md))`")


def sources(folder):
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(SOURCES):
                yield os.path.relpath(os.path.join(here, f), folder)


def named_alone(rel, spans, globs):
    base = os.path.basename(rel)
    stem = os.path.splitext(base)[0]
    for span in spans:
        if base in span or rel in span or re.fullmatch(r"(.*/)?" + re.escape(stem), span):
            return True
    return any(fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(base, g) for g in globs)


def named(rel, files, spans, globs):
    """Named itself, or a header and its code are one name: `foo.h` names src/foo.cpp."""
    stem = os.path.splitext(os.path.basename(rel))[0]
    return any(named_alone(f, spans, globs) for f in files
               if f == rel or (os.path.splitext(os.path.basename(f))[0] == stem and
                               f.endswith((".h", ".cpp", ".cu")) and rel.endswith((".h", ".cpp", ".cu"))))


def expand(token):
    """`a/{b,c}.h` is two names."""
    m = re.search(r"\{([^}]*)\}", token)
    if not m:
        return [token]
    return [n for part in m.group(1).split(",")
            for n in expand(token[:m.start()] + part + token[m.end():])]


def exists(token, folder, root, all_files):
    for name in expand(token):
        if any(ch in name for ch in "*?"):
            found = any(fnmatch.fnmatch(f, name) or fnmatch.fnmatch(os.path.basename(f), name)
                        for f in all_files)
        else:
            found = (os.path.exists(os.path.join(folder, name)) or
                     os.path.exists(os.path.join(root, name)) or
                     any(os.path.basename(f) == os.path.basename(name) and f.endswith(name)
                         for f in all_files))
        if not found:
            return False
    return True


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(__file__), ".."))
    findings = []
    for entry in sorted(os.listdir(root)):
        folder = os.path.join(root, entry)
        readme = os.path.join(folder, "README.md")
        if entry in SKIP_DIRS or entry.startswith(".") or not os.path.isdir(folder):
            continue
        if not os.path.isfile(readme):
            if any(True for _ in sources(folder)):
                findings.append(f"{entry}/: source files and no README.md")
            continue
        text = open(readme, encoding="utf-8").read()
        tokens = FILE_TOKEN.findall(text)
        spans = re.findall(r"`([^`\n]+)`", text)
        globs = [n for sp in spans if "*" in sp for part in sp.split(",")
                 for n in expand(part.strip()) if "*" in n]
        files = list(sources(folder))
        for rel in files:
            if not named(rel, files, spans, globs):
                findings.append(f"{entry}/README.md: does not name {entry}/{rel}")
        repo_files = [os.path.relpath(os.path.join(h, f), root)
                      for h, ds, fs in os.walk(root)
                      if not any(p in SKIP_DIRS for p in os.path.relpath(h, root).split(os.sep))
                      for f in fs]
        for token in sorted(set(tokens)):
            if not exists(token, folder, root, files + repo_files):
                findings.append(f"{entry}/README.md: names `{token}`, which does not exist")
    for f in findings:
        print(f)
    if findings:
        print(f"check_readmes: {len(findings)} findings")
        return 1
    print("check_readmes: every folder's README names its files, and only files that exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
