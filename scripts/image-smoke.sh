#!/usr/bin/env bash
# image-smoke: builds deploy/Dockerfile for every service with podman on a machine without a
# Docker engine or an image registry, and smoke-runs each image.
#
#   1. installs podman and debootstrap when missing (Debian packages);
#   2. makes the bases locally: a Debian bookworm minbase by debootstrap, `podman import`ed as
#      localhost/debian:bookworm-slim (MEDIA_BASE and STATIC_BASE), and on it a build base with this
#      machine's Go toolchain and make (BUILD_BASE); modules come from this machine's module cache;
#   3. builds every service with `podman build --isolation chroot` (the Dockerfile's public bases
#      stay its defaults; only the build arguments differ);
#   4. mounts each image (`podman image mount`) and runs its binary inside it as the image's user
#      (`chroot --userspec=65532:65532`): migrate prepares a fresh database, virtual host and
#      bucket of the local stack; every long-running service must start and answer /healthz and
#      /readyz; the media images must hold ffmpeg, ffprobe and the speech engines; the tools run;
#   5. prints each image's size.
#
# Needs root (podman's storage, chroot) and the local stack (AMQP_URL, DATABASE_URL, S3_*: from
# .devstack/env when present). IMAGE_SMOKE_SERVICES limits it to some services (migrate always
# runs); IMAGE_SMOKE_PS_LIB=0 builds asr without its loaded recogniser (the Dockerfile's PS_LIB).
# Work files live in IMAGE_SMOKE_DIR (default
# /var/tmp/dubflow-image-smoke); the debootstrap root is kept there for the next run.
set -euo pipefail

cd "$(dirname "$0")/.."
WORK=${IMAGE_SMOKE_DIR:-/var/tmp/dubflow-image-smoke}
TAG=${IMAGE_SMOKE_TAG:-smoke}
# shellcheck source=scripts/debian-base.sh
source scripts/debian-base.sh
MEDIA_SERVICES=" extract_audio asr translate tts mux_video console "
UID_GID=65532:65532

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'image-smoke: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (podman storage, chroot)"
if [ -f .devstack/env ]; then
	set -a
	# shellcheck source=/dev/null
	source .devstack/env
	set +a
fi
: "${AMQP_URL:?AMQP_URL is not set: start the local stack (make infra) or source its env}"
: "${DATABASE_URL:?DATABASE_URL is not set}"
: "${S3_ENDPOINT:?S3_ENDPOINT is not set}"

need_packages podman debootstrap
mkdir -p "$WORK"

# The services: folders under services/ with a main package (the Makefile's rule), but for the
# test harnesses that are never deployed (e2e, chaos).
mapfile -t SERVICES < <(grep -l '^package main$' services/*/*.go | xargs -n1 dirname | xargs -n1 basename | sort -u |
	grep -vx -e e2e -e chaos)
# IMAGE_SMOKE_SERVICES (e.g. "asr console") builds and runs only those, and migrate, which prepares
# the smoke stack.
if [ -n "${IMAGE_SMOKE_SERVICES:-}" ]; then
	read -ra only <<<"$IMAGE_SMOKE_SERVICES"
	for s in "${only[@]}"; do
		[[ " ${SERVICES[*]} " == *" $s "* ]] || die "IMAGE_SMOKE_SERVICES: no service $s (have: ${SERVICES[*]})"
	done
	mapfile -t SERVICES < <(printf '%s\n' migrate "${only[@]}" | sort -u)
fi

# --- bases ---------------------------------------------------------------------------------
debian_base

GOROOT=$(go env GOROOT)
GO_VERSION=$(go env GOVERSION)
GO_VERSION=${GO_VERSION#go}
BUILD_BASE=localhost/dubflow-build:go$GO_VERSION
if ! podman image exists "$BUILD_BASE"; then
	log "build base $BUILD_BASE (Go $GO_VERSION from $GOROOT, make)"
	podman build --isolation chroot -q -t "$BUILD_BASE" -f - "$GOROOT" >/dev/null <<EOF
FROM $DEBIAN_BASE
RUN apt-get update && apt-get install -y --no-install-recommends make ca-certificates && rm -rf /var/lib/apt/lists/*
COPY . /usr/local/go/
ENV PATH=/usr/local/go/bin:/root/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EOF
fi

# Modules: this machine's module cache as a file proxy, the public proxy behind it.
MODCACHE=$(go env GOMODCACHE)/cache/download

# --- build -----------------------------------------------------------------------------------
declare -A BUILD_SECONDS
for s in "${SERVICES[@]}"; do
	runtime=static
	[[ $MEDIA_SERVICES == *" $s "* ]] && runtime=media
	log "podman build $s (RUNTIME=$runtime)"
	start=$SECONDS
	podman build --isolation chroot -q -f deploy/Dockerfile -t "localhost/dubflow/$s:$TAG" \
		--build-arg SERVICE="$s" --build-arg RUNTIME="$runtime" --build-arg PS_LIB="${IMAGE_SMOKE_PS_LIB:-1}" \
		--build-arg BUILD_BASE="$BUILD_BASE" --build-arg MEDIA_BASE="$DEBIAN_BASE" --build-arg STATIC_BASE="$DEBIAN_BASE" \
		--build-arg GOPROXY="file:///goproxy,https://proxy.golang.org" \
		-v "$MODCACHE:/goproxy:ro" . >"$WORK/build-$s.log" 2>&1 ||
		{ tail -30 "$WORK/build-$s.log" >&2; die "build of $s failed (log: $WORK/build-$s.log)"; }
	BUILD_SECONDS[$s]=$((SECONDS - start))
done

# --- smoke -----------------------------------------------------------------------------------
# A fresh database, virtual host and bucket of the local stack, removed at the end.
suffix=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
DB=dubflow_smoke_$suffix
VHOST=dubflow-smoke-$suffix
BUCKET=dubflow-smoke-$suffix
db_base=${DATABASE_URL%%\?*}
db_query=${DATABASE_URL#"$db_base"}
psql_admin() { psql -q -v ON_ERROR_STOP=1 "${db_base%/*}/postgres$db_query" "$@"; }
amqp_user=$(sed -E 's#^amqps?://([^:@/]*).*#\1#' <<<"$AMQP_URL")
PIDS=()
MOUNTED=()
SCRATCH=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for ((i = 0; i < ${#SCRATCH[@]}; i += 2)); do
		umount "${SCRATCH[i]}" 2>/dev/null || true
		rm -rf "${SCRATCH[i + 1]}"
	done
	for i in "${MOUNTED[@]}"; do podman image unmount "$i" >/dev/null 2>&1 || true; done
	psql_admin -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	rabbitmqctl -q delete_vhost "$VHOST" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 1' INT TERM
psql_admin -c "CREATE DATABASE $DB"
rabbitmqctl -q add_vhost "$VHOST" >/dev/null
rabbitmqctl -q set_permissions -p "$VHOST" "$amqp_user" '.*' '.*' '.*' >/dev/null
# The images resolve no names (no localhost in their /etc/hosts): use the loopback address.
loopback() { sed -E 's#(^|[/@])localhost([:/]|$)#\1127.0.0.1\2#' <<<"$1"; }
SMOKE_ENV=(
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/nonexistent TMPDIR=/tmp
	"AMQP_URL=$(loopback "${AMQP_URL%/}/$VHOST")"
	"DATABASE_URL=$(loopback "${db_base%/*}/$DB$db_query")"
	"S3_ENDPOINT=$(loopback "$S3_ENDPOINT")" "S3_ACCESS_KEY=${S3_ACCESS_KEY:-minioadmin}" "S3_SECRET_KEY=${S3_SECRET_KEY:-minioadmin}"
	"S3_BUCKET=$BUCKET" "S3_USE_SSL=${S3_USE_SSL:-false}"
	LOG_LEVEL=warn DISPATCHER_API_TOKEN=image-smoke-token-0123456789 DUBFLOW_API_TOKEN=image-smoke-console-0123456789
)

# mount_image SERVICE: sets root to the image's root folder. The mount is read-only (as the pods' root
# filesystem is); a fresh scratch folder is bound over its /tmp (the pods' emptyDir at TMPDIR).
mount_image() {
	local scratch
	root=$(podman image mount "localhost/dubflow/$1:$TAG")
	MOUNTED+=("localhost/dubflow/$1:$TAG")
	scratch=$(mktemp -d "$WORK/scratch-$1.XXXXXX")
	chmod 1777 "$scratch"
	mount --bind "$scratch" "$root/tmp"
	SCRATCH+=("$root/tmp" "$scratch")
}
# in_image SERVICE ARGS...: runs ARGS inside SERVICE's image as its user, with the smoke env.
in_image() {
	local root=$1; shift
	env -i "${SMOKE_ENV[@]}" chroot --userspec=$UID_GID "$root" "$@"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_http() { # wait_http URL PID: 200 within 60 s while PID lives
	local url=$1 pid=$2
	for _ in $(seq 1 600); do
		kill -0 "$pid" 2>/dev/null || return 1
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 200 ] && return 0
		sleep 0.1
	done
	return 1
}

declare -A RESULT
log "migrate (database, bucket, topology of the smoke stack)"
mount_image migrate
in_image "$root" /app/service >"$WORK/run-migrate.log" 2>&1 ||
	{ cat "$WORK/run-migrate.log" >&2; die "migrate failed inside its image"; }
RESULT[migrate]="migrated database, bucket and topology"

for s in "${SERVICES[@]}"; do
	mount_image "$s"
	case $s in
	migrate) continue ;;
	dubctl)
		in_image "$root" /app/service help >"$WORK/run-$s.log" 2>&1 || in_image "$root" /app/service -h >>"$WORK/run-$s.log" 2>&1 || true
		grep -qi 'usage\|submit' "$WORK/run-$s.log" || { cat "$WORK/run-$s.log" >&2; die "$s: no usage text"; }
		RESULT[$s]="prints its usage"
		continue ;;
	tts_requeue)
		in_image "$root" /app/service -limit 10 >"$WORK/run-$s.log" 2>&1 || { cat "$WORK/run-$s.log" >&2; die "$s failed inside its image"; }
		RESULT[$s]="ran one pass against the smoke stack"
		continue ;;
	esac
	if [[ $MEDIA_SERVICES == *" $s "* ]]; then
		for tool in ffmpeg ffprobe pocketsphinx_continuous apertium espeak-ng; do
			in_image "$root" sh -c "command -v $tool" >/dev/null || die "$s: $tool is not in the image"
		done
		in_image "$root" ffmpeg -hide_banner -f lavfi -i sine=d=0.2 -f wav -y /tmp/smoke.wav >/dev/null 2>&1 ||
			die "$s: ffmpeg does not run as $UID_GID"
		# ffmpeg's fork server (FFMPEG_ZYGOTE): the library lies beside the service, loads against the
		# image's C library and, outside a worker (no control socket), leaves ffmpeg to run as itself.
		[ -f "$root/app/libffzygote.so" ] || die "$s: /app/libffzygote.so missing (ffmpeg's fork server)"
		if ! in_image "$root" env LD_PRELOAD=/app/libffzygote.so ffmpeg -hide_banner -f lavfi -i sine=d=0.2 -f wav -y \
			/tmp/smoke-z.wav >/dev/null 2>"$WORK/zygote-$s.log" || grep -q 'LD_PRELOAD' "$WORK/zygote-$s.log"; then
			cat "$WORK/zygote-$s.log" >&2
			die "$s: ffmpeg does not run with /app/libffzygote.so preloaded"
		fi
		modes=$(in_image "$root" apertium -l) || die "$s: apertium does not run"
		[[ $modes == *eng-spa* && $modes == *eng-cat* ]] || die "$s: apertium lacks eng-spa or eng-cat"
		in_image "$root" espeak-ng -v es -w /tmp/smoke-es.wav "hola" || die "$s: espeak-ng does not speak"
		[ -d "$root/usr/share/pocketsphinx/model/en-us" ] || die "$s: pocketsphinx-en-us model missing"
	fi
	if [ "$s" = asr ] && [ "${IMAGE_SMOKE_PS_LIB:-1}" != 0 ]; then
		# The Dockerfile's default PS_LIB=1: the loaded recogniser, linked against the image's library.
		in_image "$root" ldd /app/service | grep -q 'libpocketsphinx\.so' || die "asr: not linked against libpocketsphinx (PS_LIB)"
	fi
	ops=127.0.0.1:$(free_port)
	http=127.0.0.1:$(free_port)
	env -i "${SMOKE_ENV[@]}" OPS_ADDR="$ops" DISPATCHER_HTTP_ADDR="$http" CONSOLE_HTTP_ADDR="$http" \
		chroot --userspec=$UID_GID "$root" /app/service >"$WORK/run-$s.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	if ! wait_http "http://$ops/healthz" "$pid" || ! wait_http "http://$ops/readyz" "$pid"; then
		cat "$WORK/run-$s.log" >&2
		die "$s: no 200 from /healthz and /readyz on $ops"
	fi
	user=$(ps -o uid=,gid= -p "$pid" | awk '{print $1 ":" $2}')
	kill -TERM "$pid"
	wait "$pid" || die "$s: did not exit 0 on SIGTERM"
	extra=""
	[[ $MEDIA_SERVICES == *" $s "* ]] && extra=", ffmpeg (also with its fork server's library) ffprobe pocketsphinx apertium(eng-spa, eng-cat) espeak-ng run"
	RESULT[$s]="/healthz and /readyz 200 as ${user:-65532}, exit 0 on SIGTERM$extra"
done

# --- report ----------------------------------------------------------------------------------
printf '\n%-14s %-8s %8s %7s  %s\n' SERVICE RUNTIME SIZE BUILD SMOKE
for s in "${SERVICES[@]}"; do
	runtime=static
	[[ $MEDIA_SERVICES == *" $s "* ]] && runtime=media
	size=$(podman image inspect --format '{{.Size}}' "localhost/dubflow/$s:$TAG" | numfmt --to=iec --suffix=B)
	printf '%-14s %-8s %8s %6ss  %s\n' "$s" "$runtime" "$size" "${BUILD_SECONDS[$s]}" "${RESULT[$s]:-?}"
done
printf '\nbases: %s (debootstrap minbase, %s), %s\n' "$DEBIAN_BASE" \
	"$(podman image inspect --format '{{.Size}}' "$DEBIAN_BASE" | numfmt --to=iec --suffix=B)" "$BUILD_BASE"
echo "image-smoke: ok"
