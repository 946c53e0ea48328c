#!/usr/bin/env bash
# bench-serial.sh: the serial baseline of the pipeline benchmark. It dubs a
# video English→Spanish by running the same tools the workers use, one after
# another, in one shell: ffmpeg (extract 16 kHz mono audio),
# pocketsphinx_continuous (ASR with word times), apertium (one call for every
# segment), espeak-ng (one call per segment), ffmpeg (assemble the dub track
# at the segments' start times and mux it beside the copied video).
#
#   scripts/bench-serial.sh INPUT.mp4 [WORKDIR]
#
# It prints the time of each stage ("stage=<name> seconds=<s>") and, last,
# "serial_seconds=<s>" for the whole run. WORKDIR (a fresh temporary folder
# by default, removed at the end) keeps the intermediate files and out.mp4.
# The services' own work (object storage, Postgres, messages, fitting,
# subtitles) is not done here: this is the floor the pipeline is compared to.
set -euo pipefail

usage() {
	echo "usage: scripts/bench-serial.sh INPUT.mp4 [WORKDIR]" >&2
	exit 2
}
[[ $# -ge 1 && $# -le 2 ]] || usage
in=$1
[[ -f $in ]] || {
	echo "bench-serial: no such file: $in" >&2
	exit 1
}
for tool in ffmpeg ffprobe pocketsphinx_continuous apertium espeak-ng; do
	command -v "$tool" >/dev/null || {
		echo "bench-serial: $tool is not installed (scripts/stack.sh up installs it)" >&2
		exit 1
	}
done
if [[ $# -eq 2 ]]; then
	work=$2
	mkdir -p "$work"
else
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
ff() { ffmpeg -nostdin -hide_banner -loglevel error -y "$@"; }

start=$(now)

t=$(now)
ff -i "$in" -vn -ac 1 -ar 16000 -c:a pcm_s16le "$work/audio.wav"
echo "stage=extract_audio seconds=$(since "$t")"

t=$(now)
# The decoder search the asr worker runs with (POCKETSPHINX_SEARCH, the
# same default): the baseline differs from the pipeline by its orchestration only.
search=${POCKETSPHINX_SEARCH:--fwdflat no -maxhmmpf 6000}
[ "$search" = default ] && search=
# shellcheck disable=SC2086 # flags and values, split at blanks
pocketsphinx_continuous -infile "$work/audio.wav" -time yes -logfn /dev/null $search >"$work/asr.txt"
# Utterances: a text line, then "word start end confidence" lines from <s>
# to </s>. A segment spans its first and last real word.
awk '
	function flush() {
		if (text != "" && first != "") printf "%d\t%d\t%s\n", first * 1000, last * 1000, text
		text = ""; first = ""
	}
	NF == 4 && $2 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ && $4 ~ /^-?[0-9.]+$/ {
		if ($1 ~ /^(<s>|<\/s>|<sil>|\[.*\]|\+\+.*\+\+)$/) next
		if (first == "") first = $2
		last = $3
		next
	}
	{ flush(); text = $0 }
	END { flush() }
' "$work/asr.txt" >"$work/segments.tsv"
n=$(wc -l <"$work/segments.tsv")
echo "stage=asr seconds=$(since "$t") segments=$n"
((n > 0)) || {
	echo "bench-serial: no speech found in $in" >&2
	exit 1
}

t=$(now)
cut -f3 "$work/segments.tsv" >"$work/src.txt"
apertium -u eng-spa <"$work/src.txt" >"$work/mt.txt"
if [[ $(wc -l <"$work/mt.txt") -ne $n ]]; then
	echo "bench-serial: apertium returned $(wc -l <"$work/mt.txt") lines for $n" >&2
	exit 1
fi
echo "stage=translate seconds=$(since "$t")"

t=$(now)
i=0
while IFS= read -r line; do
	espeak-ng -v es -w "$work/seg-$i.wav" -- "$line"
	i=$((i + 1))
done <"$work/mt.txt"
echo "stage=tts seconds=$(since "$t")"

t=$(now)
duration=$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$in")
inputs=() filter="" mix=""
i=0
while IFS=$'\t' read -r start_ms _ _; do
	inputs+=(-i "$work/seg-$i.wav")
	filter+="[$i:a]aresample=44100,adelay=${start_ms}:all=1[d$i];"
	mix+="[d$i]"
	i=$((i + 1))
done <"$work/segments.tsv"
filter+="${mix}amix=inputs=$n:normalize=0:duration=longest,apad,atrim=0:${duration}[dub]"
ff "${inputs[@]}" -filter_complex "$filter" -map "[dub]" -ac 1 -c:a pcm_s16le "$work/dub.wav"
ff -i "$in" -i "$work/dub.wav" -map 0:v:0 -map 1:a -map 0:a:0 -c:v copy -c:a aac -b:a 96k \
	-shortest -movflags +faststart "$work/out.mp4"
echo "stage=mux_video seconds=$(since "$t")"

echo "serial_seconds=$(since "$start")"
