#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# build.sh [OUTDIR] - compile the gpuqos GPU benchmark workloads (lc_micro,
# be_fill) for Hopper (sm_90). Binaries go to OUTDIR, default tests/gpu/bin.
# Environment: NVCC (default nvcc, else /usr/local/cuda/bin/nvcc),
# NVCC_ARCH (default sm_90).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/bin}
arch=${NVCC_ARCH:-sm_90}
nvcc=${NVCC:-}
if [[ -z $nvcc ]]; then
	if command -v nvcc >/dev/null; then
		nvcc=nvcc
	elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
		nvcc=/usr/local/cuda/bin/nvcc
	else
		echo "build.sh: nvcc not found (set NVCC)" >&2
		exit 1
	fi
fi

mkdir -p "$out"
# lc_micro also calls the driver API (--pre latch: cuStreamWriteValue32).
for prog in lc_micro be_fill; do
	libs=()
	[[ $prog == lc_micro ]] && libs=(-lcuda)
	"$nvcc" -O2 -arch="$arch" -std=c++17 -Xcompiler -Wall \
		-o "$out/$prog" "$here/$prog.cu" "${libs[@]}"
	echo "built $out/$prog"
done
# Tracer-cost workloads: context creation (driver API) and raw RM ioctls.
"$nvcc" -O2 -arch="$arch" -std=c++17 -o "$out/ctx_bench" "$here/ctx_bench.cu" -lcuda
echo "built $out/ctx_bench"
${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -I"$here/../.." -o "$out/rm_latency" "$here/rm_latency.c"
echo "built $out/rm_latency"
# Experiment library (LD_PRELOAD): in-process timeslice, interleave and
# channel-disable rotation (docs/PERF.md, 2026-11-23).
${CC:-cc} -std=c11 -O2 -D_GNU_SOURCE -Wall -Wextra -Wshadow -fPIC -shared -I"$here/../.." \
	-o "$out/rm_probe.so" "$here/rm_probe.c" -ldl -lpthread
echo "built $out/rm_probe.so"
