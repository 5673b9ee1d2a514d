#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# bundle.sh [DIR] - build gpuqos (no sanitizers, no simulator) into DIR
# (default build-gpu/) together with the shared libraries the node agent and
# gpuqosctl load that a bare GPU machine lacks, so the bundle can
# be copied to a GPU machine that has no Debian packages. The preempt agent
# needs only libc and is built the same way.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build-gpu}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUQOS_SIM=OFF -DGPUQOS_TESTS=OFF >/dev/null
cmake --build "$dir" -j"$(nproc)" --target gpuqos-agent gpuqosctl gpuqos gpuqos-preempt >/dev/null
if grep -q "^gpuqos-tsgtrace:" "$dir/Makefile" 2>/dev/null || [ -d "$dir/bpf" ]; then
	cmake --build "$dir" -j"$(nproc)" --target gpuqos-tsgtrace >/dev/null
fi
# The device plugin when gRPC was found, and the grpc-go test kubelet (a
# static Go binary) that drives it in tests/gpu/allocate_check.py.
if [ -d "$dir/plugin" ]; then
	cmake --build "$dir" -j"$(nproc)" --target gpuqos-device-plugin >/dev/null
	sh tests/plugin/build_kubelet.sh "$(cd "$dir" && pwd)/kubelet-test" >/dev/null || true
fi
mkdir -p "$dir/lib"
bins="$dir/agent/gpuqos-agent $dir/agent/cli/gpuqosctl"
[ -x "$dir/bpf/gpuqos-tsgtrace" ] && bins="$bins $dir/bpf/gpuqos-tsgtrace"
[ -x "$dir/plugin/gpuqos-device-plugin" ] && bins="$bins $dir/plugin/gpuqos-device-plugin"
# shellcheck disable=SC2086
# Everything but the C library itself: a GPU machine has none of Debian's
# -dev libraries (cJSON, libbpf, libcurl, libyaml, gRPC, protobuf-c, ...).
for so in $(ldd $bins | awk '$3 ~ /^\// {print $3}' |
	grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | sort -u); do
	cp -L "$so" "$dir/lib/"
done
ls "$dir/lib"
