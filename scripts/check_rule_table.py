#!/usr/bin/env python3
"""scheduler/README.md's rule table against src/rules/rules.def, the only registry: the same
rules of each kind, in the same order. The suite runs it as docs.rules."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEF = ROOT / "scheduler" / "src" / "rules" / "rules.def"
README = ROOT / "scheduler" / "README.md"
ROWS = {"SYNC_RULE": "convert a value?", "REMOVE_RULE": "remove a conversion?",
        "KEEP_RULE": "a kept conversion: can it go anyway?",
        "EDIT_RULE": "can the edit be made?", "OVERLAP_RULE": "two edits overlap: which goes?"}

registry = {k: [] for k in ROWS}
for line in DEF.read_text().splitlines():
    m = re.match(r'^([A-Z]+_RULE)\("([a-z0-9-]+)"', line)
    if m:
        if m.group(1) not in registry:
            sys.exit(f"{DEF}: error: {m.group(1)} has no row in {README.name}'s table (ROWS)")
        registry[m.group(1)].append(m.group(2))
bad = False
text = README.read_text()
for macro, label in ROWS.items():
    row = re.search(r"^\| " + re.escape(label) + r" \| (.*) \|$", text, re.M)
    if not row:
        print(f"{README}: error: no row '{label}' in the rule table")
        bad = True
        continue
    listed = re.findall(r"`([a-z0-9-]+)`", row.group(1))
    if listed != registry[macro]:
        print(f"{README}: error: '{label}' lists {listed}; {DEF.name} registers {registry[macro]}")
        bad = True
for rule in {r for rules in registry.values() for r in rules}:
    if not (DEF.parent / (rule.replace("-", "_") + ".cpp")).exists():
        print(f"{DEF}: error: rule '{rule}' has no file {rule.replace('-', '_')}.cpp")
        bad = True
if bad:
    sys.exit(1)
print(f"docs.rules: the README's table is rules.def's {sum(map(len, registry.values()))} rules")
