#!/usr/bin/env bash
# promtool.sh ARGS...: runs Prometheus' promtool, installing Debian's prometheus package (which
# ships it) when it is missing. deploy/alerts_test.go checks and unit-tests dubflow's alerts with it.
set -euo pipefail
if ! command -v promtool >/dev/null; then
	command -v apt-get >/dev/null || { echo "promtool.sh: promtool is missing and there is no apt-get" >&2; exit 1; }
	sudo=()
	[ "$(id -u)" = 0 ] || sudo=(sudo -n)
	echo "promtool.sh: installing Debian's prometheus package for promtool" >&2
	# Only the tool is wanted: keep the package from starting a Prometheus server.
	if [ "$(id -u)" = 0 ] && [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
		chmod +x /usr/sbin/policy-rc.d
		trap 'rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
promtool "$@"
