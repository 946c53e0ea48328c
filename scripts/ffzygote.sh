#!/usr/bin/env bash
# ffzygote.sh DIR: builds the ffmpeg fork server library (pkg/media/ffzygote/ffzygote.c) into
# DIR/libffzygote.so, where the workers look for it next to their binaries (FFMPEG_ZYGOTE).
# Without a C compiler it builds nothing and says so: the workers then start ffmpeg anew for
# every job, as they do with FFMPEG_ZYGOTE=off.
set -euo pipefail
dir=${1:?usage: scripts/ffzygote.sh DIR}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src=$root/pkg/media/ffzygote/ffzygote.c
out=$dir/libffzygote.so
cc=${CC:-cc}
if ! command -v "$cc" >/dev/null; then
	echo "ffzygote: no C compiler ($cc): $out not built; ffmpeg starts anew for every job" >&2
	exit 0
fi
[[ -f $out && $out -nt $src ]] && exit 0
mkdir -p "$dir"
tmp=$(mktemp "$dir/.libffzygote.XXXXXX")
trap 'rm -f "$tmp"' EXIT
"$cc" -O2 -Wall -Wextra -Werror -shared -fPIC -o "$tmp" "$src" -ldl
chmod 0755 "$tmp"
mv -f "$tmp" "$out" # a rename: a running fork server keeps the file it loaded
