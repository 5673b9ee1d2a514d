#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# launch_bench.sh BUILD [N] [REPEAT] - what counting a launch costs the
# calling thread: N calls of cuLaunchKernel (the test build's fake libcuda,
# which only checks its arguments), reached through cuGetProcAddress_v2 as
# the CUDA runtime reaches it, without and with libgpuqos-preempt.so
# preloaded (no node agent: the library runs alone). Prints one line per
# run and a table of the medians. A benchmark, run on demand; CI only runs
# it small to keep it working (preempt.launch_bench).
set -eu
build=$1
n=${2:-20000000}
repeat=${3:-5}
work=$build/tests/preempt/rm_workload
lib=$build/tests/preempt/fake-libcuda/libcuda.so.1
pre=$build/agent/preempt/libgpuqos-preempt.so
for f in "$work" "$lib" "$pre"; do
	[ -e "$f" ] || { echo "launch_bench: $f is missing (build first)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() { # LABEL [env ...]
	label=$1
	shift
	i=0
	while [ "$i" -lt "$repeat" ]; do
		out=$(echo "launchtime $lib $n" | env GPUQOS_SOCKET="$tmp/none.sock" "$@" "$work" "$tmp/ctl")
		case $out in
		*status=ok*) ;;
		*) echo "launch_bench: $label: $out" >&2; exit 1 ;;
		esac
		echo "$label $out"
		echo "$out" | sed 's/.*ns_per_launch=\([0-9.]*\).*/\1/' >>"$tmp/$label"
		i=$((i + 1))
	done
}
run plain
run preloaded LD_PRELOAD="$pre"
med() { sort -n "$tmp/$1" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
a=$(med plain)
b=$(med preloaded)
echo
echo "| cuLaunchKernel through cuGetProcAddress_v2 | ns per call (median of $repeat x $n) |"
echo "| --- | --- |"
echo "| alone | $a |"
echo "| with libgpuqos-preempt.so (counted) | $b |"
echo "| added by counting | $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b - a}') |"
