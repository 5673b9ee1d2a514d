#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
#
# run-all.sh OUTDIR - everything gpuqos proves on a real GPU, in one go:
# the proof (proof.py) and then the latency benchmark (bench.sh) with the
# gpuqos scenario running under the real node agent and `gpuqos run`.
# Expects a bundle built by tests/gpu/bundle.sh in build-gpu/ (or $BUNDLE).
# PHASES (default "proof bench") may also name tracer and memory.
# Leaves proof.tgz and bench.tgz in OUTDIR and prints both tables last.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
# The Python test library (tests/lib/gpuqos_test) the scripts import.
export PYTHONPATH=$ROOT/tests/lib${PYTHONPATH:+:$PYTHONPATH}
OUTDIR=${1:?usage: run-all.sh OUTDIR}
B=${BUNDLE:-$ROOT/build-gpu}
PHASES=${PHASES:-"proof bench"}
mkdir -p "$OUTDIR"
T=/tmp/gpuqos-run-all
rm -rf "$T"
mkdir -p "$T/proof" "$T/bench" "$T/gq"
chmod 755 "$T" "$T/gq"

{
	date -u +%FT%TZ
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	uname -r
	nvcc --version | tail -1
	python3 -c 'import torch; print("torch", torch.__version__)'
} | tee "$T/env.txt"

bash tests/gpu/build.sh "$T/cubin" >/dev/null || { echo "build.sh failed"; exit 1; }

if [[ " $PHASES " == *" proof "* ]]; then
	PYTHONUNBUFFERED=1 python3 tests/gpu/proof.py --build "$B" --bin "$T/cubin" --out "$T/proof" \
		>"$T/proof/proof.log" 2>&1
	echo "proof exit $?" >>"$T/proof/proof.log"
fi

if [[ " $PHASES " == *" tracer "* ]]; then
	mkdir -p "$T/tracer"
	PYTHONUNBUFFERED=1 python3 tests/gpu/tracer_check.py --build "$B" --bin "$T/cubin" --out "$T/tracer" \
		>"$T/tracer/tracer.log" 2>&1
	echo "tracer exit $?" >>"$T/tracer/tracer.log"
	tar czf "$OUTDIR/tracer.tgz" -C "$T" env.txt tracer 2>/dev/null
fi

# PHASES="memory": video-memory QoS (docs/policy.md, "Memory"): what
# allocations ask the RM for, the library's budget against a minimal agent
# and its cost, then the real agent's LC reserve (mem_qos.py).
if [[ " $PHASES " == *" memory "* ]]; then
	mkdir -p "$T/memory"
	nvcc -O2 -arch="${NVCC_ARCH:-sm_90}" -o "$T/cubin/mem_probe" tests/gpu/mem_probe.cu -lcuda
	BUNDLE="$B" bash tests/gpu/mem_facts.sh "$T/memory/facts" >"$T/memory/facts.log" 2>&1
	python3 tests/gpu/mem_cap_check.py --lib "$B/agent/preempt/libgpuqos-preempt.so" \
		--probe "$T/cubin/mem_probe" --out "$T/memory/cap" >"$T/memory/cap.log" 2>&1
	echo "mem_cap_check exit $?" >>"$T/memory/cap.log"
	python3 tests/gpu/mem_qos.py --build "$B" --out "$T/memory/qos" >"$T/memory/qos.log" 2>&1
	echo "mem_qos exit $?" >>"$T/memory/qos.log"
	tar czf "$OUTDIR/memory.tgz" -C "$T" env.txt memory 2>/dev/null
	tail -n 12 "$T/memory/cap.log" "$T/memory/qos.log"
fi

if [[ " $PHASES " == *" bench "* ]]; then
	export GPUQOS_SOCKET=$T/gq/agent.sock GPUQOS_CTL_SOCKET=$T/gq/ctl.sock
	export GPUQOS_PREEMPT_LIB=$B/agent/preempt/libgpuqos-preempt.so
	LD_LIBRARY_PATH=$B/lib "$B/agent/gpuqos-agent" --standalone ${BENCH_CONFIG:+--config $BENCH_CONFIG} \
		--state-dir "$T/gq/state" --log-level debug >"$T/bench/agent.log" 2>&1 &
	AGENT=$!
	# What the agent did during the runs, for the record.
	(while kill -0 $AGENT 2>/dev/null; do
		date -u +%T; LD_LIBRARY_PATH=$B/lib "$B/agent/cli/gpuqosctl" list 2>&1; sleep 4
	done) >"$T/bench/gpuqosctl-list.log" 2>&1 &
	LC_PREFIX="$B/agent/cli/gpuqos run --class lc --" BE_PREFIX="$B/agent/cli/gpuqos run --class be --" \
		BIN=$T/cubin DURATION_S=${DURATION_S:-8} OUT=$T/bench bash tests/gpu/bench.sh >"$T/bench/bench.out" 2>&1
	kill $AGENT
	wait $AGENT 2>/dev/null
fi

tar czf "$OUTDIR/proof.tgz" -C "$T" env.txt proof 2>/dev/null
tar czf "$OUTDIR/bench.tgz" -C "$T" env.txt bench 2>/dev/null
cat "$T/env.txt"
[ -f "$T/proof/proof.log" ] && tail -n 25 "$T/proof/proof.log"
[ -f "$T/tracer/tracer.log" ] && tail -n 20 "$T/tracer/tracer.log"
[ -f "$T/bench/bench.out" ] && tail -n 16 "$T/bench/bench.out"
