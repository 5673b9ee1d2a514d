#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""test_cgroup_layout.py - gpuqos_test.cgroup2_root on the mount tables of
the layouts the tests meet: cgroup2 alone at /sys/fs/cgroup (a stock Debian
12), hybrid (v1 controllers, cgroup2 at /sys/fs/cgroup/unified), v1 alone
and no cgroups at all; then this machine's own table, whose answer must
hold a cgroup.procs."""
import os
import sys
import tempfile

from gpuqos_test import cgroup2_root

SYSFS = "22 1 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n"
V2_ALONE = "26 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
HYBRID = ("26 22 0:23 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
          "27 26 0:24 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw\n"
          "28 26 0:25 / /sys/fs/cgroup/cpu,cpuacct rw shared:11 - cgroup cgroup rw,cpu,cpuacct\n")
V1 = ("26 22 0:23 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755\n"
      "28 26 0:25 / /sys/fs/cgroup/memory rw shared:11 - cgroup cgroup rw,memory\n")
# Optional fields before the separator, and a cgroup2 mounted elsewhere.
ELSEWHERE = "40 22 0:30 / /mnt/cg rw shared:20 master:3 - cgroup2 none rw\n"


def main():
    cases = [(V2_ALONE, "/sys/fs/cgroup"), (HYBRID, "/sys/fs/cgroup/unified"), (V1, None),
             ("", None), (ELSEWHERE, None), (HYBRID + V2_ALONE, "/sys/fs/cgroup")]
    with tempfile.TemporaryDirectory(prefix="gq-mountinfo.") as tmp:
        for n, (table, want) in enumerate(cases):
            p = os.path.join(tmp, "mountinfo%d" % n)
            with open(p, "w") as f:
                f.write(SYSFS + table)
            got = cgroup2_root(p)
            if got != want:
                print("FAIL: case %d: %r, want %r" % (n, got, want))
                return 1
    here = cgroup2_root()
    if here is not None and not os.path.exists(os.path.join(here, "cgroup.procs")):
        print("FAIL: this machine's cgroup2 root %s has no cgroup.procs" % here)
        return 1
    print("ok: this machine's cgroup v2 tree is at %s" % here)
    return 0


if __name__ == "__main__":
    sys.exit(main())
