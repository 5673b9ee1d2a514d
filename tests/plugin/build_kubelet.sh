#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the grpc-go test kubelet (tests/plugin/kubelet) into <out dir>,
# offline, in GOPATH mode from Debian's packages (golang-go,
# golang-google-grpc-dev, golang-goprotobuf-dev, protoc-gen-go-1-3,
# protobuf-compiler). Exits 77 with the reason when one is missing, so the
# tests skip. Safe to run concurrently (flock); quick when up to date.
set -eu
out=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gocode=/usr/share/gocode/src

skip() { echo "skip: $*" >&2; exit 77; }
command -v go >/dev/null 2>&1 || skip "go not installed (apt-get install golang-go)"
command -v protoc >/dev/null 2>&1 || skip "protoc not installed (apt-get install protobuf-compiler)"
command -v protoc-gen-go >/dev/null 2>&1 || skip "protoc-gen-go not installed (apt-get install protoc-gen-go-1-3)"
[ -d "$gocode/google.golang.org/grpc" ] || skip "grpc-go not installed (apt-get install golang-google-grpc-dev)"
[ -d "$gocode/github.com/golang/protobuf/proto" ] || skip "goprotobuf not installed (apt-get install golang-goprotobuf-dev)"

mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
bin=$out/kubelet
if [ -x "$bin" ] && [ "$bin" -nt "$here/kubelet/main.go" ] &&
	[ "$bin" -nt "$root/proto/deviceplugin_v1beta1.proto" ]; then
	exit 0
fi
pkg=$out/gopath/src/gpuqos.test/kubelet
rm -rf "$out/gopath"
mkdir -p "$pkg/v1beta1"
cp "$here/kubelet/main.go" "$pkg/"
protoc --proto_path="$root/proto" --go_out=plugins=grpc,paths=source_relative:"$pkg/v1beta1" \
	"$root/proto/deviceplugin_v1beta1.proto"
GOPATH=$out/gopath:/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off \
	GOCACHE=$out/gocache go build -o "$bin.tmp" gpuqos.test/kubelet
mv "$bin.tmp" "$bin"
