#!/bin/sh
# Install gpuqos's Debian 12 build and test dependencies. Idempotent: installs
# only what is missing, so a second run is quick and changes nothing.
set -eu

PKGS="build-essential cmake pkg-config clang llvm libcjson-dev fuse3 libfuse3-dev \
valgrind python3 procps util-linux libcap2-bin \
libbpf-dev bpftool libelf-dev zlib1g-dev"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "install-deps: all dependencies present"
	exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
