package wire_test

import (
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
)

// TestErrorTextCutsScratchPathsAndGoNames: what a worker's error says of
// its scratch folders is cut to the file's name, and encoding/json's Go
// struct names to the field's; URLs and other paths stay as they are.
func TestErrorTextCutsScratchPathsAndGoNames(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"extract_audio: not a media file: /tmp/dubflow-extract_audio-3141/source.mp4":        "extract_audio: not a media file: source.mp4",
		"ffmpeg: file:/scratch/dubflow-mux_video-77/dub.wav: Invalid data found":             "ffmpeg: file:dub.wav: Invalid data found",
		`open "/tmp/dubflow-asr-1/dubflow-asr-chunk-003-9.wav": no such file`:                `open "dubflow-asr-chunk-003-9.wav": no such file`,
		"stat /tmp/dubflow-tts-42: permission denied":                                        "stat dubflow-tts-42: permission denied",
		"get http://minio:9000/dubflow-test-abc/videos/x/source.mp4: 503":                    "get http://minio:9000/dubflow-test-abc/videos/x/source.mp4: 503",
		"read /var/lib/other/file.txt: EOF":                                                  "read /var/lib/other/file.txt: EOF",
		"json: cannot unmarshal string into Go struct field redubBody.segment of type int":   "json: cannot unmarshal string into field segment of type int",
		"decode: json: cannot unmarshal number into Go struct field Payload.glossary.source": "decode: json: cannot unmarshal number into field source",
		"plain": "plain",
	} {
		if got := wire.ErrorText(in); got != want {
			t.Errorf("ErrorText(%q) = %q, want %q", in, got, want)
		}
		if got := wire.Reason(in); got != want {
			t.Errorf("Reason(%q) = %q, want %q", in, got, want)
		}
	}
}
