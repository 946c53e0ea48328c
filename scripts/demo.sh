#!/usr/bin/env bash
# demo.sh: dub a sample video on the local stack (`make demo`).
#
# Builds the services, starts the local stack and every worker (`make up`),
# makes a short video with real English speech (espeak-ng over a test
# picture) unless VIDEO names one, submits it with bin/dubctl and waits for
# the dubbed video. The last line printed is the dubbed video's path. The
# stack keeps running; `make down` stops it.
#
# Settings (environment):
#   VIDEO=FILE          dub this video instead of a generated sample
#   TEXT="..."          what the generated sample says
#   SOURCE, TARGET      languages (en, es)
#   DEMO_TIMEOUT        how long to wait for the task (20m)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT_DIR=.devstack/demo
SOURCE=${SOURCE:-en}
TARGET=${TARGET:-es}
DEMO_TIMEOUT=${DEMO_TIMEOUT:-20m}

log() { printf 'demo: %s\n' "$*" >&2; }
die() {
	printf 'demo: error: %s\n' "$*" >&2
	exit 1
}

log "building the services and starting the stack (make up)"
make build >&2
make up >&2

for w in extract_audio asr translate tts mux_video; do
	pid=$(cat ".devstack/pids/$w.pid" 2>/dev/null || true)
	if [[ -z $pid ]] || ! kill -0 "$pid" 2>/dev/null; then
		die "worker $w is not running; see .devstack/logs/$w.log"
	fi
done

set -a
# shellcheck source=/dev/null
source .devstack/env
set +a

mkdir -p "$OUT_DIR"
if [[ -n ${VIDEO:-} ]]; then
	[[ -f $VIDEO ]] || die "VIDEO=$VIDEO: no such file"
	video=$VIDEO
else
	video=$OUT_DIR/sample.mp4
	log "making a sample video with English speech: $video"
	if [[ -n ${TEXT:-} ]]; then
		bin/dubctl sample --out "$video" --text "$TEXT" >/dev/null
	else
		bin/dubctl sample --out "$video" >/dev/null
	fi
fi
name=$(basename "$video")
name=${name%.*}
out=$OUT_DIR/$name.dubbed.mp4

log "dubbing $video ($SOURCE → $TARGET)"
bin/dubctl submit --input "$video" --source "$SOURCE" --target "$TARGET" \
	--wait --timeout "$DEMO_TIMEOUT" --output "$out" >&2
log "the stack is still running: bin/dubctl status|list after 'source .devstack/env'; 'make down' stops it"
echo "$out"
