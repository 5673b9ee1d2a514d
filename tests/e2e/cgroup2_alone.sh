#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cgroup2_alone.sh COMMAND... - runs a Kubernetes-mode end-to-end scenario
# with the cgroup layout of a stock Debian 12 (cgroup2 alone at
# /sys/fs/cgroup), whatever this machine mounts: in a private mount
# namespace, cgroup2 mounted over /sys/fs/cgroup (which hides a hybrid
# host's v1 controllers and its /sys/fs/cgroup/unified). The scenario must
# run there: its skip (77) is a failure here. Skips (77, with the reason)
# without root or unshare.
set -u
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: a private mount namespace needs root"
	exit 77
fi
command -v unshare >/dev/null || { echo "SKIP: unshare (util-linux) is not installed"; exit 77; }
unshare -m --propagation private sh -c '
	mount -t cgroup2 cgroup2 /sys/fs/cgroup || exit 125
	if [ -e /sys/fs/cgroup/unified ]; then echo "FAIL: /sys/fs/cgroup/unified still there"; exit 1; fi
	exec "$@"' cgroup2-alone "$@"
rc=$?
case $rc in
0) echo "ok: the scenario ran with cgroup2 alone at /sys/fs/cgroup" ;;
77) echo "FAIL: the scenario skipped with cgroup2 alone at /sys/fs/cgroup (a stock Debian 12's layout)"; exit 1 ;;
125) echo "FAIL: cannot mount cgroup2 on /sys/fs/cgroup in a private mount namespace"; exit 1 ;;
esac
exit "$rc"
