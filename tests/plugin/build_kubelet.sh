#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# build_kubelet.sh OUT - the grpc-go test kubelet (tests/plugin/kubelet,
# device-plugin API v1beta1) into OUT/kubelet; exit 77 when it cannot be
# built here (tests/lib/build_go_peer.sh).
here=$(cd "$(dirname "$0")" && pwd)
GO_PEER_SRC=$here exec sh "$here/../lib/build_go_peer.sh" kubelet deviceplugin_v1beta1.proto v1beta1 "$1"
