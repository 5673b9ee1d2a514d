#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# build_go_peer.sh NAME PROTO GOPKG OUT - builds a grpc-go test peer
# (tests/<...>/NAME/main.go, the directory of the calling wrapper) into
# OUT/NAME, offline, in GOPATH mode from Debian's packages (golang-go,
# golang-google-grpc-dev, golang-goprotobuf-dev, protoc-gen-go-1-3,
# protobuf-compiler), with the Go code for proto/PROTO generated into the
# package's GOPKG subfolder. Exits 77 with the reason when a package is
# missing, so the tests skip. Safe to run concurrently (flock); quick when
# the binary is newer than its sources.
set -eu
name=$1 proto=$2 gopkg=$3 out=$4
src=${GO_PEER_SRC:?the wrapper sets GO_PEER_SRC}/$name
root=$(cd "$(dirname "$0")/../.." && pwd)
gocode=/usr/share/gocode/src

skip() { echo "skip: $*" >&2; exit 77; }
command -v go >/dev/null 2>&1 || skip "go not installed (apt-get install golang-go)"
command -v protoc >/dev/null 2>&1 || skip "protoc not installed (apt-get install protobuf-compiler)"
command -v protoc-gen-go >/dev/null 2>&1 || skip "protoc-gen-go not installed (apt-get install protoc-gen-go-1-3)"
[ -d "$gocode/google.golang.org/grpc" ] || skip "grpc-go not installed (apt-get install golang-google-grpc-dev)"
[ -d "$gocode/github.com/golang/protobuf/jsonpb" ] || skip "goprotobuf not installed (apt-get install golang-goprotobuf-dev)"

mkdir -p "$out"
exec 9>"$out/.build.lock"
flock 9
bin=$out/$name
if [ -x "$bin" ] && [ "$bin" -nt "$src/main.go" ] && [ "$bin" -nt "$root/proto/$proto" ]; then
	exit 0
fi
pkg=$out/gopath/src/gpuqos.test/$name
rm -rf "$out/gopath"
mkdir -p "$pkg/$gopkg"
cp "$src/main.go" "$pkg/"
protoc --proto_path="$root/proto" --go_out=plugins=grpc,paths=source_relative:"$pkg/$gopkg" \
	"$root/proto/$proto"
GOPATH=$out/gopath:/usr/share/gocode GO111MODULE=off GOFLAGS= GOPROXY=off \
	GOCACHE=$out/gocache go build -o "$bin.tmp" "gpuqos.test/$name"
mv "$bin.tmp" "$bin"
