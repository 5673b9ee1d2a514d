# SPDX-License-Identifier: Apache-2.0
"""proc - how a suite starts a process that must not be root: the one
non-root set-up before exec, for every launcher that offers a non-root
workload (gpuqos_test.node, tests/gpu/proof.py and tracer_check.py).

    subprocess.Popen(cmd, preexec_fn=as_nobody if nonroot else None)
"""
import os

NOBODY = 65534  # uid and gid of nobody / nogroup on Debian


def as_nobody():
    """A preexec_fn: the child drops every supplementary group, then its
    gid, then its uid (in that order: once the uid is gone it may no longer
    change the others) to nobody before it execs."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
