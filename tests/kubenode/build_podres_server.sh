#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# build_podres_server.sh OUT - the grpc-go test kubelet's pod-resources
# server (tests/kubenode/podres_server, API v1) into OUT/podres_server; exit
# 77 when it cannot be built here (tests/lib/build_go_peer.sh).
here=$(cd "$(dirname "$0")" && pwd)
GO_PEER_SRC=$here exec sh "$here/../lib/build_go_peer.sh" podres_server podresources_v1.proto v1 "$1"
