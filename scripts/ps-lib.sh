#!/usr/bin/env bash
# ps-lib.sh: prints the go build flag that builds the asr worker's embedded
# recogniser with its decoders kept loaded in process (-tags=pocketsphinx_lib,
# pkg/speech) when this machine can build it, else nothing. The Makefile and
# the tests' service builds (pkg/testenv) both ask it, so they agree.
#
#   PS_LIB=auto (default)  the flag when cgo is on and pkg-config finds
#                          Debian's libpocketsphinx-dev and libsphinxbase-dev
#                          (scripts/stack.sh installs them)
#   PS_LIB=1               the same, with a warning when it cannot
#   PS_LIB=0               never: a pocketsphinx_continuous process per file
set -euo pipefail
mode=${PS_LIB:-auto}
case $mode in
0) exit 0 ;;
1 | auto) ;;
*)
	echo "ps-lib: PS_LIB=$mode: want 0, 1 or auto" >&2
	exit 2
	;;
esac
if [[ $(${GO:-go} env CGO_ENABLED 2>/dev/null) == 1 ]] && pkg-config --exists pocketsphinx sphinxbase 2>/dev/null; then
	echo "-tags=pocketsphinx_lib"
elif [[ $mode == 1 ]]; then
	echo "ps-lib: PS_LIB=1 but cgo is off or pkg-config finds no pocketsphinx/sphinxbase (apt-get install libpocketsphinx-dev libsphinxbase-dev pkg-config): a process per file" >&2
fi
