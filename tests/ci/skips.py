#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""skips.py JUNIT ALLOWED - the skips of a ctest run (ctest --output-junit
JUNIT): prints each skipped test with the reason it printed (a line that
starts with "SKIP" or "skip", as every gpuqos test prints before exit 77),
and exits 1 when a test skipped without a reason or for a reason that the
allow-list ALLOWED (tests/ci/skips-allowed.txt: a test-name pattern, a tab, a
reason pattern) does not name. Exit 0 otherwise, also with no skips.
./scripts/test runs it after ctest.
"""
import re
import sys
import xml.etree.ElementTree as ET


def allowed_list(path):
    rules = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            name, sep, why = line.partition("\t")
            if not sep or not name or not why:
                raise SystemExit("%s:%d: want NAME-PATTERN<tab>REASON-PATTERN, got %r" % (path, n, line))
            rules.append((re.compile(name), re.compile(why)))
    return rules


def reason(out):
    for line in out.splitlines():
        if re.match(r"\s*skip\b", line, re.I):
            return line.strip()
    return None


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    rules = allowed_list(sys.argv[2])
    try:
        cases = ET.parse(sys.argv[1]).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print("skips: cannot read %s: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    bad = 0
    for tc in cases:
        if tc.get("status") != "notrun":
            continue
        name = tc.get("name", "?")
        out = tc.findtext("system-out") or ""
        why = reason(out)
        if why is None:
            sk = tc.find("skipped")
            detail = sk.get("message", "") if sk is not None else ""
            print("skipped without a reason: %s (%s)%s" % (name, detail or "not run",
                  ": " + out.strip().splitlines()[-1] if out.strip() else ""))
            bad += 1
        elif any(n.search(name) and w.search(why) for n, w in rules):
            print("skipped (allowed): %s: %s" % (name, why))
        else:
            print("skipped (not allowed, see tests/ci/skips-allowed.txt): %s: %s" % (name, why))
            bad += 1
    if bad:
        print("skips: %d test(s) skipped that must run here: the run fails" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
