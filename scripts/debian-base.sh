#!/usr/bin/env bash
# debian-base.sh: sourced (not run) by scripts/image-smoke.sh and scripts/containers.sh, which
# build images with podman on a machine without a Docker engine or an image registry. The caller
# defines log and die, runs as root and sets WORK (a folder kept between runs).
#
#   need_packages CMD...   installs the Debian packages named like the commands that are missing
#   debian_base            makes DEBIAN_BASE: a Debian bookworm minbase by debootstrap (its root
#                          kept in $WORK/rootfs for the next run), `podman import`ed
DEBIAN_RELEASE=bookworm
DEBIAN_BASE=localhost/debian:$DEBIAN_RELEASE-slim
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

need_packages() {
	local missing=() c
	for c in "$@"; do
		command -v "$c" >/dev/null || missing+=("$c")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		log "installing ${missing[*]}"
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
	fi
}

debian_base() {
	podman image exists "$DEBIAN_BASE" && return 0
	if [ ! -x "$WORK/rootfs/bin/bash" ]; then
		log "debootstrap --variant=minbase $DEBIAN_RELEASE"
		rm -rf "$WORK/rootfs"
		debootstrap --variant=minbase "$DEBIAN_RELEASE" "$WORK/rootfs" "$DEBIAN_MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
			{ tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
	fi
	log "podman import $DEBIAN_BASE"
	tar -C "$WORK/rootfs" -c . | podman import - "$DEBIAN_BASE" >/dev/null
}
