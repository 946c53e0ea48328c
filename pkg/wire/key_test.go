package wire_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

func TestCheckKey(t *testing.T) {
	id := uuid.MustParse(taskID)
	other := uuid.MustParse("7c9e6679-7425-40de-944b-e07fc1f90ae7")
	tests := []struct {
		key, kind string
		task      uuid.UUID
		want      string // "" when the key is valid
	}{
		{"videos/" + taskID + "/source.mp4", wire.KindVideo, id, ""},
		{"tts/" + taskID + "/seg/000001.wav", wire.KindTTS, id, ""},
		{"outputs/" + taskID + "/final file.mp4", wire.KindOutput, id, ""},
		{"outputs/" + taskID + "/.timing.json", wire.KindOutput, id, ""},
		{"videos/" + taskID + "/source.mp4", wire.KindAudio, id, `must start with "audios/` + taskID + `/"`},
		{"videos/" + taskID + "/source.mp4", wire.KindVideo, other, `must start with "videos/` + other.String() + `/"`},
		{"videos/" + strings.ToUpper(taskID) + "/source.mp4", wire.KindVideo, id, "must start with"},
		{"videos/" + taskID, wire.KindVideo, id, "must start with"},
		{"videos/" + taskID + "/../" + other.String() + "/source.mp4", wire.KindVideo, id, "must not contain '..'"},
		{"videos/" + taskID + "/a..b", wire.KindVideo, id, "must not contain '..'"},
		{"/videos/" + taskID + "/source.mp4", wire.KindVideo, id, "must not start with '/'"},
		{`videos\` + taskID + `\source.mp4`, wire.KindVideo, id, `must not contain '\'`},
		{"videos/" + taskID + "//source.mp4", wire.KindVideo, id, "must not contain empty segments"},
		{"videos/" + taskID + "/./source.mp4", wire.KindVideo, id, "must not contain '.' segments"},
		{"videos/" + taskID + "/source\x00.mp4", wire.KindVideo, id, "must not contain control characters"},
		{"videos/" + taskID + "/source\r.mp4", wire.KindVideo, id, "must not contain control characters"},
		{"videos/" + taskID + "/source\xff.mp4", wire.KindVideo, id, "must be valid UTF-8"},
		{"videos/" + taskID + "/" + strings.Repeat("x", wire.MaxKeyBytes), wire.KindVideo, id, "must be at most 1024 bytes"},
		{"", wire.KindVideo, id, "must not be empty"},
		{"etc/" + taskID + "/passwd", "etc", id, `unknown key kind "etc"`},
	}
	for _, tc := range tests {
		err := wire.CheckKey(tc.key, tc.kind, tc.task)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckKey(%q, %q): %v", tc.key, tc.kind, err)
			}
			continue
		}
		var ie *wire.InvalidError
		if !errors.As(err, &ie) {
			t.Errorf("CheckKey(%q, %q) = %v, want an *InvalidError", tc.key, tc.kind, err)
			continue
		}
		if ie.Field != "key" || !strings.Contains(ie.Reason, tc.want) {
			t.Errorf("CheckKey(%q, %q) = %q, want key: %q", tc.key, tc.kind, err, tc.want)
		}
	}
}

func TestDefaultKeys(t *testing.T) {
	id := uuid.MustParse(taskID)
	k := wire.DefaultKeys(id)
	want := []struct{ got, want, kind string }{
		{k.SourceVideo, "videos/" + taskID + "/source.mp4", wire.KindVideo},
		{k.SourceAudio, "audios/" + taskID + "/source.wav", wire.KindAudio},
		{k.ASR, "asr/" + taskID + "/asr.json", wire.KindASR},
		{k.DubAudio, "tts/" + taskID + "/dub.wav", wire.KindTTS},
		{k.OutputVideo, "outputs/" + taskID + "/final.mp4", wire.KindOutput},
		{wire.SegmentKey(id, 12), "tts/" + taskID + "/seg-000012.wav", wire.KindTTS},
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("key %q, want %q", w.got, w.want)
		}
		if err := wire.CheckKey(w.got, w.kind, id); err != nil {
			t.Errorf("default key %q: %v", w.got, err)
		}
	}
}

func TestSegmentIndex(t *testing.T) {
	for idx, id := range map[int]string{0: "seg-0", 7: "seg-7", 123456789: "seg-123456789"} {
		if got := wire.SegmentID(idx); got != id {
			t.Errorf("SegmentID(%d) = %q", idx, got)
		}
		got, err := wire.SegmentIndex(id)
		if err != nil || got != idx {
			t.Errorf("SegmentIndex(%q) = %d, %v", id, got, err)
		}
	}
	for _, bad := range []string{"", "seg-", "seg-01", "seg--1", "seg-+1", "seg-1x", "0", "seg-1234567890", "SEG-1"} {
		if _, err := wire.SegmentIndex(bad); err == nil {
			t.Errorf("SegmentIndex(%q) accepted", bad)
		}
	}
}

func TestSegmentIndexes(t *testing.T) {
	got, err := wire.SegmentIndexes([]string{"seg-3", "seg-0", "seg-12"})
	if err != nil || !slices.Equal(got, []int32{3, 0, 12}) {
		t.Errorf("SegmentIndexes = %v, %v", got, err)
	}
	if got, err := wire.SegmentIndexes(nil); got != nil || err != nil {
		t.Errorf("SegmentIndexes(nil) = %v, %v; want nil, nil (a message of the whole task)", got, err)
	}
	_, err = wire.SegmentIndexes([]string{"seg-1", "seg-01"})
	if err == nil || !strings.Contains(err.Error(), "segment_ids") || !strings.Contains(err.Error(), "seg-01") {
		t.Errorf("SegmentIndexes with seg-01: %v; want an error naming segment_ids and the id", err)
	}
}
