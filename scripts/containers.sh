#!/usr/bin/env bash
# containers: runs one package's tests on pkg/testenv's container path (testcontainers-go) through
# podman's Docker-compatible service, on a machine without a Docker engine or an image registry.
#
#   scripts/containers.sh [PKG] [go test flags...]     (make test-containers PKG=./pkg/outbox/, the
#                                                       default; ./outbox/ names the same package)
#
#   1. installs podman, runc and debootstrap when missing (Debian packages);
#   2. writes a private containers.conf (CONTAINERS_CONF; the machine's /etc files stay untouched):
#      runc, as crun refuses this machine's cgroup layout, and default ulimits no higher than the
#      machine's hard limits, since a VM without CAP_SYS_RESOURCE cannot raise them;
#   3. builds, once (kept by tag), stand-ins tagged with the images pkg/testenv pins, on the Debian
#      base scripts/image-smoke.sh makes: Debian's rabbitmq-server and PostgreSQL 15, and the MinIO
#      binary scripts/stack.sh builds (.tools/minio, or MINIO_BIN) — a run checks the container
#      path, not the pinned versions; an image already present under a pinned name is used as is;
#   4. starts `podman system service` on a private socket as DOCKER_HOST, runs `go test` with
#      AMQP_URL, DATABASE_URL, S3_* and RABBITMQ_NODENAME unset (so testenv takes the container
#      path), testcontainers' reaper off (its image cannot be had here) and the containers' ports
#      reached on 127.0.0.1 (this machine has a /.dockerenv, which makes testcontainers take itself
#      for a container and dial the bridge's gateway instead), then removes the
#      containers the run created (label org.testcontainers=true) and stops the service.
#
# Needs root (podman's storage). Work files in CONTAINERS_DIR (default /var/tmp/dubflow-containers).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${CONTAINERS_DIR:-/var/tmp/dubflow-containers}
PKG=${1:-./pkg/outbox/}
shift || true
# A package of the pkg module may be named from there (./outbox/).
if [ ! -d "$PKG" ] && [ -d "pkg/$PKG" ]; then PKG=./pkg/${PKG#./}; fi
# shellcheck source=scripts/debian-base.sh
source scripts/debian-base.sh

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'containers: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (podman's storage)"
need_packages podman runc debootstrap
mkdir -p "$WORK"

# The images pkg/testenv pins, read from the source.
pinned() { sed -n "s/^\t$1 *= \"\(.*\)\"$/\1/p" pkg/testenv/containers.go; }
RABBIT_IMAGE=$(pinned RabbitImage)
POSTGRES_IMAGE=$(pinned PostgresImage)
MINIO_IMAGE=$(pinned MinIOImage)
if [ -z "$RABBIT_IMAGE" ] || [ -z "$POSTGRES_IMAGE" ] || [ -z "$MINIO_IMAGE" ]; then
	die "could not read the pinned images from pkg/testenv/containers.go"
fi

# --- podman's configuration ------------------------------------------------------------------
export CONTAINERS_CONF=$WORK/containers.conf
# at_most LIMIT N: N, or the machine's hard LIMIT (ulimit's flag) when lower.
at_most() {
	local hard
	hard=$(ulimit -H "$1")
	if [ "$hard" != unlimited ] && [ "$hard" -lt "$2" ]; then echo "$hard"; else echo "$2"; fi
}
nofile=$(at_most -n 20000)
nproc=$(at_most -u 32768)
cat >"$CONTAINERS_CONF" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
EOF

# --- stand-ins -------------------------------------------------------------------------------
# stand_in IMAGE CONTEXT [FILE]: builds IMAGE from CONTEXT/Containerfile (FILE copied into the
# context) unless it exists: an image not built here is used as is; a stand-in built from another
# Containerfile or entry point (its label) is built again.
stand_in() {
	local sum have log=$WORK/build-${2##*/}.log
	sum=$(find "$2" -maxdepth 1 -type f \( -name Containerfile -o -name '*.sh' \) | sort | xargs cat | sha256sum | cut -c1-16)
	if podman image exists "$1"; then
		have=$(podman image inspect --format '{{index .Labels "dubflow.stand-in"}}' "$1")
		if [ -z "$have" ] || [ "$have" = "$sum" ]; then
			log "$1: present${have:+ (stand-in $sum)}"
			return 0
		fi
	fi
	log "$1: building a stand-in ($2)"
	if [ -n "${3:-}" ]; then
		[ -x "$3" ] || die "no $3 for the stand-in $1"
		cp "$3" "$2/"
	fi
	podman build --isolation chroot -q -t "$1" --label dubflow.stand-in="$sum" \
		--build-arg BASE="$DEBIAN_BASE" "$2" >"$log" 2>&1 ||
		{ tail -30 "$log" >&2; die "build of the stand-in $1 failed (log: $log)"; }
	[ -z "${3:-}" ] || rm -f "$2/${3##*/}"
}

# No service starts while a package installs (the build shares the machine's network and ports).
NO_START='printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'

stand_ins() {
	debian_base
	mkdir -p "$WORK/rabbitmq" "$WORK/postgres" "$WORK/minio"
	cat >"$WORK/rabbitmq/Containerfile" <<EOF
ARG BASE
FROM \$BASE
RUN $NO_START && apt-get update && apt-get install -y --no-install-recommends rabbitmq-server && \\
	rm -rf /var/lib/apt/lists/* && printf 'loopback_users = none\nlisteners.tcp.default = 5672\n' >/etc/rabbitmq/rabbitmq.conf
ENV RABBITMQ_LOGS=- HOME=/var/lib/rabbitmq
USER rabbitmq
EXPOSE 5672
CMD ["/usr/lib/rabbitmq/bin/rabbitmq-server"]
EOF
	stand_in "$RABBIT_IMAGE" "$WORK/rabbitmq"

	cp scripts/containers-postgres.sh "$WORK/postgres/entrypoint.sh"
	cat >"$WORK/postgres/Containerfile" <<EOF
ARG BASE
FROM \$BASE
RUN $NO_START && apt-get update && apt-get install -y --no-install-recommends postgresql-15 && rm -rf /var/lib/apt/lists/*
COPY entrypoint.sh /usr/local/bin/
EXPOSE 5432
ENTRYPOINT ["/bin/sh", "/usr/local/bin/entrypoint.sh"]
EOF
	stand_in "$POSTGRES_IMAGE" "$WORK/postgres"

	cat >"$WORK/minio/Containerfile" <<EOF
ARG BASE
FROM \$BASE
COPY minio /usr/bin/minio
EXPOSE 9000
ENTRYPOINT ["/usr/bin/minio"]
CMD ["server", "/data"]
EOF
	# The MinIO scripts/stack.sh builds (scripts/stack.sh up --infra-only once), or MINIO_BIN.
	stand_in "$MINIO_IMAGE" "$WORK/minio" "${MINIO_BIN:-$ROOT/.tools/minio}"
}
stand_ins

# --- the service, the tests, the cleanup -----------------------------------------------------
SOCK=$WORK/podman.sock
before=$(podman ps -aq --filter label=org.testcontainers=true | sort)
SERVICE_PID=
cleanup() {
	local ids
	ids=$(comm -13 <(echo "$before") <(podman ps -aq --filter label=org.testcontainers=true | sort))
	if [ -n "$ids" ]; then
		log "removing the run's containers: $(echo "$ids" | wc -l)"
		# shellcheck disable=SC2086 # one id a word
		podman rm -f -t 5 $ids >/dev/null || true
	fi
	if [ -n "$SERVICE_PID" ]; then
		kill "$SERVICE_PID" 2>/dev/null || true
		wait "$SERVICE_PID" 2>/dev/null || true
	fi
	rm -f "$SOCK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

rm -f "$SOCK"
podman system service --time=0 "unix://$SOCK" >"$WORK/service.log" 2>&1 &
SERVICE_PID=$!
for _ in $(seq 1 100); do
	[ "$(curl -s --unix-socket "$SOCK" http://d/_ping)" = OK ] && break
	kill -0 "$SERVICE_PID" 2>/dev/null || { cat "$WORK/service.log" >&2; die "podman system service ended"; }
	sleep 0.1
done
[ "$(curl -s --unix-socket "$SOCK" http://d/_ping)" = OK ] || die "podman's service does not answer on $SOCK"
log "podman system service on $SOCK ($(podman --version), runtime runc)"

log "go test $PKG on containers"
env -u AMQP_URL -u DATABASE_URL -u S3_ENDPOINT -u S3_ACCESS_KEY -u S3_SECRET_KEY -u S3_USE_SSL -u S3_BUCKET \
	-u RABBITMQ_NODENAME DOCKER_HOST="unix://$SOCK" TESTCONTAINERS_RYUK_DISABLED=true \
	TESTCONTAINERS_HOST_OVERRIDE="${TESTCONTAINERS_HOST_OVERRIDE:-127.0.0.1}" \
	go test -count=1 "$@" "$PKG"
