#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench.sh - the gpuqos latency benchmark: LC workloads alone, next to a
# best-effort GPU filler at driver defaults, and next to it under gpuqos.
#
# Runs, in order:
#   be_fill alone                  (BE throughput baseline; its calibrated
#                                   iteration count is reused by every later BE)
#   for each LC workload in $WORKLOADS:
#     alone      LC only, same request pattern
#     defaults   LC + be_fill, both at the driver's defaults
#     gpuqos     LC + be_fill with gpuqos set up (see below); skipped when
#                nothing is configured
#
# LC workloads: micro (lc_micro, 35 us kernel every 2 ms), micro_graph (the
# same launched as a CUDA graph), resnet50_graph and resnet50_eager
# (lc_torch.py, one request every 5 ms).
#
# The gpuqos scenario's setup is a hook:
#   GPUQOS_SETUP=/path/exe   called as `exe LC_PID BE_PID` once both are
#                            initialised and warm, before the measurement
#                            starts (both are waiting on a start file); the
#                            measurement starts when it returns
#   otherwise LC_PREFIX / BE_PREFIX, command prefixes that LC and BE run
#   under, e.g. LC_PREFIX="gpuqos run --class lc --". (With a prefix, the pid
#   that a setup would see is the prefix's; a prefix should exec.)
#
# Environment:
#   DURATION_S   seconds of measurement per run (default 10)
#   WORKLOADS    default "micro resnet50_graph resnet50_eager"
#   SCENARIOS    default "alone defaults gpuqos"
#   BIN          where lc_micro and be_fill are (default tests/gpu/bin)
#   PYTHON       default python3
#   MICRO_PERIOD_US (2000), MICRO_KERNEL_US (35), TORCH_PERIOD_MS (5)
#   BE_KERNEL_MS (10), BE_ITERS (skip the calibration: use this count)
#   BE_ARGS      extra be_fill arguments for every BE run (e.g. "--inflight 1")
#   MICRO_ARGS   extra lc_micro arguments, TORCH_ARGS extra lc_torch.py ones
#   OUT          results go to $OUT/bench.jsonl and $OUT/bench.log
#                (default ./bench-out/)
#
# The last thing printed is a markdown table.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=${BIN:-$here/bin}
DUR=${DURATION_S:-10}
PY=${PYTHON:-python3}
WORKLOADS=${WORKLOADS:-"micro resnet50_graph resnet50_eager"}
SCENARIOS=${SCENARIOS:-"alone defaults gpuqos"}
MICRO_PERIOD_US=${MICRO_PERIOD_US:-2000}
MICRO_KERNEL_US=${MICRO_KERNEL_US:-35}
TORCH_PERIOD_MS=${TORCH_PERIOD_MS:-5}
BE_KERNEL_MS=${BE_KERNEL_MS:-10}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-240}
outdir=${OUT:-./bench-out}
mkdir -p "$outdir"
jsonl=$outdir/bench.jsonl
log=$outdir/bench.log
: >"$jsonl"
: >"$log"

say() { echo "bench: $*" | tee -a "$log" >&2; }

for prog in lc_micro be_fill; do
	if [[ ! -x $BIN/$prog ]]; then
		say "$BIN/$prog missing: run tests/gpu/build.sh first"
		exit 1
	fi
done

# How the gpuqos scenario is set up: setup | prefix | none.
read -r -a be_args <<<"${BE_ARGS:-}"
read -r -a micro_args <<<"${MICRO_ARGS:-}"
read -r -a torch_args <<<"${TORCH_ARGS:-}"
read -r -a lc_prefix <<<"${LC_PREFIX:-}"
read -r -a be_prefix <<<"${BE_PREFIX:-}"
gpuqos_mode=none
if [[ -n ${GPUQOS_SETUP:-} ]]; then
	if [[ -x $GPUQOS_SETUP && ! -d $GPUQOS_SETUP ]]; then
		gpuqos_mode=setup
	else
		say "GPUQOS_SETUP=$GPUQOS_SETUP is not an executable; ignored"
	fi
fi
if [[ $gpuqos_mode == none && (${#lc_prefix[@]} -gt 0 || ${#be_prefix[@]} -gt 0) ]]; then
	gpuqos_mode=prefix
fi

# Children still running when the script exits are stopped, by pid.
children=()
cleanup() {
	local p
	for p in "${children[@]}"; do
		kill "$p" 2>/dev/null
	done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Wait until file $1 exists while pid $2 lives; at most READY_TIMEOUT_S.
wait_ready() {
	local file=$1 pid=$2 i
	for ((i = 0; i < READY_TIMEOUT_S * 20; i++)); do
		[[ -e $file ]] && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

# Wait for pid $1 at most $2 seconds, then stop it. Returns its exit status.
wait_deadline() {
	local pid=$1 secs=$2 i
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		say "pid $pid overran its deadline; stopping it"
		kill "$pid" 2>/dev/null
		sleep 1
		kill -9 "$pid" 2>/dev/null
	fi
	wait "$pid"
}

# The LC command for workload $1, in the array lc_cmd.
lc_command() {
	case $1 in
	micro)
		lc_cmd=("$BIN/lc_micro" --period-us "$MICRO_PERIOD_US" --kernel-us "$MICRO_KERNEL_US"
			--duration-s "$DUR" --warmup-s 1 ${micro_args[@]+"${micro_args[@]}"}) ;;
	micro_graph)
		lc_cmd=("$BIN/lc_micro" --period-us "$MICRO_PERIOD_US" --kernel-us "$MICRO_KERNEL_US"
			--duration-s "$DUR" --warmup-s 1 --graph ${micro_args[@]+"${micro_args[@]}"}) ;;
	resnet50_graph | resnet50_eager)
		lc_cmd=("$PY" "$here/lc_torch.py" --mode "${1#resnet50_}" --period-ms "$TORCH_PERIOD_MS"
			--duration-s "$DUR" --warmup-s 2 ${torch_args[@]+"${torch_args[@]}"}) ;;
	*)
		say "unknown workload $1"
		return 1 ;;
	esac
}

# Append the last JSON line of file $1 to bench.jsonl, tagged with scenario
# $2 and LC workload $3.
emit() {
	local line
	line=$(grep '^{' "$1" | tail -n 1)
	if [[ -z $line ]]; then
		say "no result in $1 (scenario $2, workload $3)"
		return 1
	fi
	echo "{\"scenario\":\"$2\",\"lc_workload\":\"$3\",${line#\{}" >>"$jsonl"
}

be_iters=${BE_ITERS:-}

# One BE-alone run; sets be_iters from its result.
run_be_alone() {
	local tmp args=(--duration-s "$DUR" --kernel-ms "$BE_KERNEL_MS" ${be_args[@]+"${be_args[@]}"})
	tmp=$(mktemp -d)
	[[ -n $be_iters ]] && args+=(--iters "$be_iters")
	say "be_fill alone (${DUR}s)"
	"$BIN/be_fill" "${args[@]}" >"$tmp/be.json" 2>>"$log" &
	local pid=$!
	children+=("$pid")
	wait_deadline "$pid" $((DUR + 120)) || say "be_fill exited with status $?"
	emit "$tmp/be.json" be_alone be_fill
	if [[ -z $be_iters ]]; then
		be_iters=$(grep -o '"iters":[0-9]*' "$tmp/be.json" | tail -n 1 | cut -d: -f2)
	fi
	rm -rf "$tmp"
}

# run_scenario WORKLOAD SCENARIO
run_scenario() {
	local w=$1 sc=$2 tmp be_pid="" lc_pid="" rc
	local pre_lc=() pre_be=()
	lc_command "$w" || return 1
	if [[ $sc == gpuqos && $gpuqos_mode == prefix ]]; then
		pre_lc=(${lc_prefix[@]+"${lc_prefix[@]}"})
		pre_be=(${be_prefix[@]+"${be_prefix[@]}"})
	fi
	tmp=$(mktemp -d)
	say "$w / $sc (${DUR}s)"

	if [[ $sc != alone ]]; then
		${pre_be[@]+"${pre_be[@]}"} "$BIN/be_fill" --iters "$be_iters" --duration-s "$DUR" \
			${be_args[@]+"${be_args[@]}"} \
			--ready-file "$tmp/be.ready" --start-file "$tmp/go" \
			>"$tmp/be.json" 2>>"$log" &
		be_pid=$!
		children+=("$be_pid")
		if ! wait_ready "$tmp/be.ready" "$be_pid"; then
			say "be_fill did not get ready"
			kill "$be_pid" 2>/dev/null
			wait "$be_pid" 2>/dev/null
			rm -rf "$tmp"
			return 1
		fi
	fi

	${pre_lc[@]+"${pre_lc[@]}"} "${lc_cmd[@]}" --ready-file "$tmp/lc.ready" --start-file "$tmp/go" \
		>"$tmp/lc.json" 2>>"$log" &
	lc_pid=$!
	children+=("$lc_pid")
	if ! wait_ready "$tmp/lc.ready" "$lc_pid"; then
		say "$w did not get ready"
		kill "$lc_pid" ${be_pid:+"$be_pid"} 2>/dev/null
		wait "$lc_pid" 2>/dev/null
		[[ -n $be_pid ]] && wait "$be_pid" 2>/dev/null
		rm -rf "$tmp"
		return 1
	fi

	if [[ $sc == gpuqos && $gpuqos_mode == setup ]]; then
		say "setup: $GPUQOS_SETUP $lc_pid $be_pid"
		"$GPUQOS_SETUP" "$lc_pid" "$be_pid" >>"$log" 2>&1 ||
			say "GPUQOS_SETUP exited with status $? (measuring anyway)"
	fi

	touch "$tmp/go"
	wait_deadline "$lc_pid" $((DUR + 120))
	rc=$?
	((rc != 0)) && say "$w exited with status $rc"
	if [[ -n $be_pid ]]; then
		wait_deadline "$be_pid" 60
		rc=$?
		((rc != 0)) && say "be_fill exited with status $rc"
	fi
	emit "$tmp/lc.json" "$sc" "$w"
	[[ -n $be_pid ]] && emit "$tmp/be.json" "$sc" "$w"
	rm -rf "$tmp"
	return 0
}

# Where and when.
gpu=unknown driver=unknown
if command -v nvidia-smi >/dev/null; then
	IFS=, read -r gpu driver < <(nvidia-smi --query-gpu=name,driver_version \
		--format=csv,noheader -i 0 2>/dev/null | sed 's/, /,/g')
fi
echo "{\"scenario\":\"meta\",\"date\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"gpu\":\"$gpu\",\"driver\":\"$driver\",\"duration_s\":$DUR,\"gpuqos_mode\":\"$gpuqos_mode\"}" >>"$jsonl"
say "GPU $gpu, driver $driver, ${DUR}s per run, gpuqos scenario: $gpuqos_mode"

t_bench=$SECONDS
run_be_alone
if [[ -z $be_iters ]]; then
	say "no BE iteration count (be_fill alone failed); stopping"
	exit 1
fi
for w in $WORKLOADS; do
	for sc in $SCENARIOS; do
		if [[ $sc == gpuqos && $gpuqos_mode == none ]]; then
			say "$w / gpuqos skipped: set GPUQOS_SETUP or LC_PREFIX/BE_PREFIX"
			continue
		fi
		run_scenario "$w" "$sc"
	done
done
say "done in $((SECONDS - t_bench)) s; results in $jsonl"

"$PY" "$here/bench_table.py" "$jsonl" || cat "$jsonl"
