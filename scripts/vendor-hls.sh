#!/usr/bin/env bash
# Refreshes the console's vendored HLS player (hls.js, Apache-2.0) from the
# npm registry: scripts/vendor-hls.sh [version]. The page loads it only to
# play a task's growing stream where the browser has no HLS of its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${1:-1.6.15}
dest=services/console/web/static/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "hls.js@$version" >/dev/null)
tar -xzf "$work"/hls.js-"$version".tgz -C "$work"
mkdir -p "$dest"
cp "$work/package/dist/hls.min.js" "$dest/hls.min.js"
cp "$work/package/LICENSE" "$dest/hls.js.LICENSE"
echo "hls.js $version: $(sha256sum "$dest/hls.min.js" | cut -d' ' -f1)"
