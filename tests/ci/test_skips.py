#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_skips.py SKIPS ALLOWED - skips.py on made-up ctest JUnit files: a
run without skips passes; an allowed skip passes and is printed with its
reason; a skip the allow-list does not name, one whose reason does not
match its entry, and one that printed no reason each fail the run, named;
a malformed allow-list line is an error."""
import os
import subprocess
import sys
import tempfile

HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="x" tests="3">\n'
RAN = '<testcase name="abi.one" status="run"><system-out>ok\n</system-out></testcase>\n'


def skipped(name, out):
    return ('<testcase name="%s" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>'
            '<system-out>%s</system-out></testcase>\n' % (name, out))


def run(skips, allowed, tmp, *cases):
    j = os.path.join(tmp, "j.xml")
    with open(j, "w") as f:
        f.write(HEAD + "".join(cases) + "</testsuite>\n")
    p = subprocess.run([sys.executable, skips, j, allowed], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout + p.stderr


def fail(what):
    print("FAIL: " + what)
    sys.exit(1)


def main():
    skips, allowed = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="gq-skips.") as tmp:
        rc, out = run(skips, allowed, tmp, RAN)
        if rc != 0 or "skipped" in out:
            fail("no skips: rc %d %r" % (rc, out))
        gpu = skipped("demo.run", "SKIP: an NVIDIA driver is here: the demo runs the real GPU\n")
        rc, out = run(skips, allowed, tmp, RAN, gpu)
        if rc != 0 or "skipped (allowed): demo.run: SKIP: an NVIDIA driver is here" not in out:
            fail("the allowed skip: rc %d %r" % (rc, out))
        other = skipped("chart.lint", "SKIP: helm not found at /x/bin/helm\n")
        rc, out = run(skips, allowed, tmp, RAN, gpu, other)
        if rc != 1 or "not allowed" not in out or "chart.lint: SKIP: helm not found" not in out \
                or "1 test(s)" not in out:
            fail("a skip not allowed: rc %d %r" % (rc, out))
        # The right test for the wrong reason is not allowed either.
        rc, out = run(skips, allowed, tmp, skipped("demo.run", "skip: no root\n"))
        if rc != 1 or "not allowed" not in out or "demo.run: skip: no root" not in out:
            fail("an allowed test for another reason: rc %d %r" % (rc, out))
        rc, out = run(skips, allowed, tmp, skipped("e2e.x", "starting\n"))
        if rc != 1 or "skipped without a reason: e2e.x" not in out:
            fail("a skip without a reason: rc %d %r" % (rc, out))
        bad = os.path.join(tmp, "bad.txt")
        with open(bad, "w") as f:
            f.write("^demo\\. no tab here\n")
        rc, out = run(skips, bad, tmp, RAN)
        if rc == 0 or "want NAME-PATTERN<tab>REASON-PATTERN" not in out:
            fail("a malformed allow-list: rc %d %r" % (rc, out))
    print("ok")


if __name__ == "__main__":
    main()
