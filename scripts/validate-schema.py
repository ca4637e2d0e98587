#!/usr/bin/python3
"""Validate x-allocator documents against the JSON Schemas in formats/schema/.

Usage: scripts/validate-schema.py DOC.json [DOC.json ...]   ("-" reads a stream on stdin)

Each file may hold one document or a stream of them (JSON Lines); the schema is chosen by the
document's "schema" field. Exits 0 when all are valid, 1 when one is not, 2 on bad usage.
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
    store = {common["$id"]: common}
    validators = {}
    for kind, name in KINDS.items():
        schema = load(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        resolver = jsonschema.RefResolver.from_schema(schema, store=store)
        validators[kind] = jsonschema.Draft202012Validator(schema, resolver=resolver)
    bad = 0
    for path in argv[1:]:
        text = sys.stdin.read() if path == "-" else open(path).read()
        for i, doc in enumerate(documents(text)):
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
