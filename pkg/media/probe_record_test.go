package media

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestProbeRecordReusedForTheSameBytesOnly: a recorded probe, through its
// JSON, is what Probe says of a copy of the file at another path, and is
// not reused for other bytes of the same size, another size, another
// ffprobe's record, or no record.
func TestProbeRecordReusedForTheSameBytesOnly(t *testing.T) {
	ctx := context.Background()
	video := sample(t, SampleSpeech)
	info, err := Probe(ctx, video)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := RecordProbe(video, info)
	if err != nil || rec == nil {
		t.Fatalf("record: %v, %v", rec, err)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseProbeRecord(raw)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(video)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	same := filepath.Join(dir, "downloaded.media")
	writeBytes(t, same, data)
	got, err := back.Reuse(same)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Probe(ctx, same)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reused probe\n%+v\nffprobe of the copy\n%+v", got, want)
	}
	changed := append([]byte(nil), data...)
	changed[len(changed)/2] ^= 1
	other := filepath.Join(dir, "other.media")
	writeBytes(t, other, changed)
	shorter := filepath.Join(dir, "shorter.media")
	writeBytes(t, shorter, data[:len(data)-1])
	for _, p := range []string{other, shorter} {
		if got, err := back.Reuse(p); got != nil || err != nil {
			t.Errorf("%s: reused %+v (%v) for other bytes", filepath.Base(p), got, err)
		}
	}
	elsewhere := *back
	elsewhere.Prober = "/usr/local/bin/ffprobe:1:2"
	if got, err := elsewhere.Reuse(same); got != nil || err != nil {
		t.Errorf("reused %+v (%v), the probe of another ffprobe", got, err)
	}
	for _, none := range []string{"", "null"} {
		if r, err := ParseProbeRecord([]byte(none)); r != nil || err != nil {
			t.Errorf("ParseProbeRecord(%q) = %+v, %v", none, r, err)
		} else if got, err := r.Reuse(same); got != nil || err != nil {
			t.Errorf("a nil record reused %+v, %v", got, err)
		}
	}
}

func writeBytes(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
