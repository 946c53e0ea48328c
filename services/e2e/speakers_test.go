package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestTwoSpeakers dubs a clip built from two fixtures — jfk.wav (a higher
// voice), a second of silence, then 11 s of two_cities.wav (a lower one) —
// and expects two speakers: the segments of the first part spoken by one
// voice, those of the second by another, a high and a low one. Whole, the
// clip is one asr message and tts clusters all its segments at once; in
// 12 s chunks each voice is in a chunk of its own, transcribed in either
// order, and the tts part of the chunk done second finds the second voice
// beside the first one's speaker (speaker.Extend).
func TestTwoSpeakers(t *testing.T) {
	t.Parallel() // each test runs its own stack (database, virtual host, bucket, processes)
	for _, c := range []struct {
		name string
		env  map[string]string
	}{
		{"whole", nil},
		{"chunks", map[string]string{"ASR_CHUNK_SECONDS": "12"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			twoSpeakers(t, c.env)
		})
	}
}

func twoSpeakers(t *testing.T, env map[string]string) {
	s := newStack(t, env)
	s.start(t, append(append([]string{}, workers...), helpers...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	video := filepath.Join(t.TempDir(), "two.mp4")
	cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-v", "error", "-y",
		"-f", "lavfi", "-i", "testsrc2=size=320x240:rate=10",
		"-i", fixture(t, "jfk.wav"), "-i", fixture(t, "two_cities.wav"), "-filter_complex",
		"[1:a]aresample=16000,aformat=channel_layouts=mono,apad=pad_dur=1[a];"+
			"[2:a]aresample=16000,aformat=channel_layouts=mono,atrim=0:11[b];[a][b]concat=n=2:v=0:a=1[out]",
		"-map", "0:v", "-map", "[out]", "-t", "23", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p",
		"-c:a", "aac", video)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make the clip: %v\n%s", err, out)
	}
	stdout, stderr, code := s.dubctl(t, ctx, "submit", "--input", video, "--wait", "--json", "--timeout", "4m",
		"--output", filepath.Join(t.TempDir(), "two.es.mp4"))
	v := decodeTask(t, stdout, stderr)
	if code != 0 {
		t.Fatalf("submit: exit %d, %s: %s\n%s", code, v.Status, v.Error, stderr)
	}
	segs := s.segments(t, ctx, v.TaskID)
	voiceOf := map[string]string{}
	for _, sg := range segs {
		t.Logf("%5d-%5d ms %s %s %q", sg.StartMS, sg.EndMS, sg.Speaker, sg.Voice, sg.SourceText)
		if sg.Speaker == "" || sg.Voice == "" {
			t.Errorf("segment %d has no speaker or voice: %+v", sg.N, sg)
		}
		if old, ok := voiceOf[sg.Speaker]; ok && old != sg.Voice {
			t.Errorf("speaker %s speaks with %s and %s", sg.Speaker, old, sg.Voice)
		}
		voiceOf[sg.Speaker] = sg.Voice
	}
	// Speaker of each part: the one of the segments that lie inside it.
	part := func(from, to int) map[string]bool {
		out := map[string]bool{}
		for _, sg := range segs {
			if sg.StartMS >= from && sg.EndMS <= to {
				out[sg.Speaker] = true
			}
		}
		return out
	}
	first, second := part(0, 11000), part(12000, 23000)
	if len(first) != 1 || len(second) != 1 || len(voiceOf) != 2 {
		t.Fatalf("speakers: first part %v, second part %v, all %v; want one each, two in all", first, second, voiceOf)
	}
	for a := range first {
		for b := range second {
			if a == b || voiceOf[a] != "es+f2" || voiceOf[b] != "es+m3" {
				t.Errorf("first part %s (%s), second %s (%s): want a high voice es+f2, then a low one es+m3",
					a, voiceOf[a], b, voiceOf[b])
			}
		}
	}
}
