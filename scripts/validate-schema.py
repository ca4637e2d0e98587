#!/usr/bin/python3
"""Validate x-allocator documents against the JSON Schemas in formats/schema/.

Usage: scripts/validate-schema.py DOC.json [DOC.json ...]   ("-" reads a stream on stdin)

Each file may hold one document or a stream of them (JSON Lines); the schema is chosen by the
document's "schema" field. A file with no document, malformed JSON, or JSON nested deeper than
the tools read (256 levels) is not valid. A UTF-8 byte order mark is skipped, as the tools skip
it. Exits 0 when all are valid, 1 when one is not, 2 on bad usage or an unreadable file.
"""
import json
import os
import sys

import jsonschema

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "formats", "schema")
KINDS = {"xalloc.profile": "profile", "xalloc.cost": "cost", "xalloc.schedule": "schedule"}


def load(name):
    with open(os.path.join(SCHEMA_DIR, name + ".schema.json")) as f:
        return json.load(f)


MAX_DEPTH = 256  # formats::kMaxJsonDepth


def too_deep(text):
    """The offset of the bracket that nests deeper than MAX_DEPTH, or None."""
    depth, in_string, escaped = 0, False, False
    for i, c in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return i
        elif c in "]}":
            depth -= 1
    return None


def line_col(text, pos):
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def documents(text):
    dec = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        doc, pos = dec.raw_decode(text, pos)
        yield doc


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    common = load("common")
    validators = {}
    try:  # jsonschema 4.18 on: $refs through the referencing library
        import referencing
        import referencing.jsonschema
        registry = referencing.Registry().with_resource(
            common["$id"], referencing.Resource.from_contents(
                common, default_specification=referencing.jsonschema.DRAFT202012))
        options = {"registry": registry}
    except ImportError:  # older: its RefResolver
        store = {common["$id"]: common}
        options = None
    for kind, name in KINDS.items():
        schema = load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        if options is None:
            resolver = jsonschema.RefResolver.from_schema(schema, store=store)
            validators[kind] = jsonschema.Draft202012Validator(schema, resolver=resolver)
        else:
            validators[kind] = jsonschema.Draft202012Validator(schema, **options)
    bad = 0
    for path in argv[1:]:
        try:
            text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError) as e:
            print(f"{path}: error: cannot read: {e}", file=sys.stderr)
            return 2
        text = text.removeprefix("\ufeff")
        deep = too_deep(text)
        if deep is not None:
            line, col = line_col(text, deep)
            print(f"{path}:{line}:{col}: error: JSON nested deeper than {MAX_DEPTH} levels",
                  file=sys.stderr)
            bad += 1
            continue
        try:
            docs = list(documents(text))
        except json.JSONDecodeError as e:
            print(f"{path}:{e.lineno}:{e.colno}: error: malformed JSON: {e.msg}", file=sys.stderr)
            bad += 1
            continue
        if not docs:
            print(f"{path}: error: no JSON document in the input", file=sys.stderr)
            bad += 1
            continue
        for i, doc in enumerate(docs):
            kind = doc.get("schema") if isinstance(doc, dict) else None
            if kind not in validators:
                print(f"{path}: document {i}: error: unknown schema {kind!r}", file=sys.stderr)
                bad += 1
                continue
            errors = sorted(validators[kind].iter_errors(doc), key=lambda e: list(e.path))
            for e in errors[:10]:
                pointer = "/" + "/".join(str(p) for p in e.path)
                print(f"{path}: {pointer}: error: {e.message}", file=sys.stderr)
            bad += bool(errors)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
