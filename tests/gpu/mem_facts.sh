#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# mem_facts.sh OUT - on a GPU machine: what taking GPU memory asks the RM
# for on this driver (docs/rm-facts.md, "Video memory"). Runs mem_probe
# (cudaMalloc, VMM, async pools, managed, pinned host memory; then cudaMalloc
# of 1 GiB until refused) and mem_probe_torch.py (PyTorch's allocator, with
# and without expandable segments) under the preempt library's trace, and
# writes OUT/mem-facts.txt (mem_probe_report.py per run) beside the traces.
# Needs the bundle at build-gpu/ or $BUNDLE (tests/gpu/bundle.sh) and nvcc.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: mem_facts.sh OUT}
mkdir -p "$out/traces"
bin=$(mktemp -d)
lib=${BUNDLE:-$PWD/build-gpu}/agent/preempt/libgpuqos-preempt.so
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
"$nvcc" -O2 -arch="${NVCC_ARCH:-sm_90}" -o "$bin/mem_probe" tests/gpu/mem_probe.cu -lcuda || exit 1
report="$out/mem-facts.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >"$report"
one() { # NAME CMD...
	local name=$1
	shift
	echo "=== $name: $*" >>"$report"
	GPUQOS_TRACE="$out/traces/$name-%p.jsonl" LD_PRELOAD="$lib" "$@" >"$out/traces/$name.out" 2>&1
	echo "exit $?" >>"$report"
	python3 tests/gpu/mem_probe_report.py "$out/traces/$name.out" "$out"/traces/"$name"-*.jsonl >>"$report" 2>&1
}
one probe "$bin/mem_probe"
one probe_fill "$bin/mem_probe" --fill
one torch python3 tests/gpu/mem_probe_torch.py --fill
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True one torch_expandable python3 tests/gpu/mem_probe_torch.py --fill
rm -rf "$bin"
