package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/minio/minio-go/v7"
)

// ffmpegVideo makes a small test video: seconds long, with a tone unless
// silent (no audio stream at all).
func ffmpegVideo(t *testing.T, seconds int, silent bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), fmt.Sprintf("in-%d-%v.mp4", seconds, silent))
	args := []string{"-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10"}
	if !silent {
		args = append(args, "-f", "lavfi", "-i", "sine=frequency=440", "-c:a", "aac", "-shortest")
	}
	args = append(args, "-t", strconv.Itoa(seconds), "-c:v", "libx264", "-pix_fmt", "yuv420p", out)
	if b, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, b)
	}
	return out
}

// writeFile writes body to a new file named name and returns its path.
func writeFile(t *testing.T, name string, body []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// nothingLeft fails unless no task, outbox message, object or published
// message exists.
func (e *env) nothingLeft(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var tasks, outbox int
	if err := e.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM outbox)`).
		Scan(&tasks, &outbox); err != nil {
		t.Fatal(err)
	}
	if tasks != 0 || outbox != 0 {
		t.Fatalf("%d task(s) and %d outbox message(s) left behind by a refused submit", tasks, outbox)
	}
	for o := range e.bucket.Client.ListObjects(ctx, e.bucket.Name, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		t.Fatalf("object %s left behind by a refused submit", o.Key)
	}
	// The console mode clears AMQP_URL; the queue is read with the test's own URL.
	if _, ok, err := testenv.Channel(t, e.amqpURL).Get(wire.QueueExtractAudio, true); err != nil || ok {
		t.Fatalf("a message was published for a refused submit (%v)", err)
	}
}

// TestSubmitRefusesTheSameBadInputsInBothModes runs every bad submission
// through dubctl with a database and through the console: each exits 2
// with pkg/admit's text for the same input (the console's and
// extract_audio's text too) and leaves no task, object or message behind.
// In console mode the engines are judged by the console (dubctl has no
// database), so a refusal there proves the console's door says the same.
func TestSubmitRefusesTheSameBadInputsInBothModes(t *testing.T) {
	const maxBytes, maxSeconds = 2 << 20, 2
	t.Setenv("MAX_VIDEO_BYTES", strconv.Itoa(maxBytes))
	t.Setenv("MAX_VIDEO_SECONDS", strconv.Itoa(maxSeconds))
	e := setup(t)
	caps := admittest.AnnounceInstalled(t, e.db.Pool)
	m := &modes{e: e, console: startConsole(t, e)}
	ctx := context.Background()

	good, long, silent := ffmpegVideo(t, 1, false), ffmpegVideo(t, 3, false), ffmpegVideo(t, 1, true)
	random := make([]byte, maxBytes+1)
	_, _ = rand.Read(random)
	noise, huge := writeFile(t, "noise.mp4", random[:1<<20]), writeFile(t, "huge.mp4", random)
	var terms1001 strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&terms1001, "term%d,t%d\n", i, i)
	}
	glossary := func(name, body string) string { return writeFile(t, name, []byte(body)) }
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: caps}
	lim := admit.Limits{MaxBytes: maxBytes, MaxSeconds: maxSeconds}

	for _, tc := range []struct {
		name                      string
		source, target, speaker   string
		glossary, video, wantText string
		review                    string
	}{
		{name: "target xx", target: "xx", video: good, wantText: `target "xx": no translation from en to xx`},
		{name: "target tlh", target: "tlh", video: good, wantText: `target "tlh": no translation from en to tlh`},
		{name: "source zz", source: "zz", video: good, wantText: `source "zz": no speech recognition for zz`},
		{name: "source = target", source: "es", target: "es", video: good, wantText: `target "es": the same language as the source`},
		{name: "11 targets", target: "es,ca,fr,de,it,pt,nl,ru,ja,ko,zh", video: good, wantText: `target: 11 languages, at most 10`},
		{name: "glossary with 3 fields", glossary: glossary("three.csv", "source,target\nqueue,cola,x\n"), video: good,
			wantText: `glossary: line 2: 3 fields`},
		{name: "glossary of 1001 terms", glossary: glossary("many.csv", terms1001.String()), video: good,
			wantText: `glossary: 1001 terms, at most 1000`},
		{name: "speaker with a newline", speaker: "es\nf3", video: good, wantText: `speaker: want a voice name`},
		{name: "review of the voice", review: "transcript,voice", video: good, wantText: `review "voice": want transcript, translation or both`},
		{name: "review of several languages", target: "es,ca", review: "translation", video: good,
			wantText: `review: a task dubbed into several languages at once is not reviewed`},
		{name: "random bytes", video: noise, wantText: `video: not a media file`},
		{name: "video without audio", video: silent, wantText: `video: no audio stream`},
		{name: "over MAX_VIDEO_SECONDS", video: long, wantText: `video: 3s long, at most 2s (MAX_VIDEO_SECONDS=2)`},
		{name: "over MAX_VIDEO_BYTES", video: huge, wantText: fmt.Sprintf("video: larger than %d bytes (MAX_VIDEO_BYTES)", maxBytes)},
	} {
		// What pkg/admit says of the same input.
		text := ""
		if tc.glossary != "" {
			b, err := os.ReadFile(tc.glossary)
			if err != nil {
				t.Fatal(err)
			}
			text = string(b)
		}
		_, want := admit.Check(admit.Request{Source: tc.source, Targets: []string{tc.target}, Speaker: tc.speaker,
			Glossary: text, Review: []string{tc.review}}, rules)
		if want == nil {
			_, want = lim.Media(ctx, tc.video)
		}
		if want == nil || !strings.HasPrefix(want.Error(), tc.wantText) {
			t.Fatalf("%s: pkg/admit says %v, want %q...", tc.name, want, tc.wantText)
		}
		args := []string{"submit", "--input", tc.video}
		for _, f := range [][2]string{{"--source", tc.source}, {"--target", tc.target}, {"--speaker", tc.speaker},
			{"--glossary", tc.glossary}, {"--review", tc.review}} {
			if f[1] != "" {
				args = append(args, f[0], f[1])
			}
		}
		for _, mode := range modeNames {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				m.use(t, mode)
				_, stderr, code := run(t, args...)
				if code != cli.ExitUsage || !strings.Contains(stderr, want.Error()) {
					t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, cli.ExitUsage, want.Error())
				}
				e.nothingLeft(t)
			})
		}
	}
}

// TestNoValidateStillRefusesGarbage: --no-validate skips ffprobe, not the
// checks that need none: a text file, an empty one and one over
// MAX_VIDEO_BYTES are refused with the same text in both modes and leave
// nothing behind; a real video passes.
func TestNoValidateStillRefusesGarbage(t *testing.T) {
	t.Setenv("MAX_VIDEO_BYTES", strconv.Itoa(1<<20))
	e := setup(t)
	m := &modes{e: e, console: startConsole(t, e)}
	big := make([]byte, 1<<20+1)
	copy(big[4:], "ftyp")
	for _, tc := range []struct{ name, path, want string }{
		{"text", writeFile(t, "notes.mp4", []byte("not a video at all\n")), "video: not a media container dubflow knows"},
		{"empty", writeFile(t, "empty.mp4", nil), "video: empty file"},
		{"too large", writeFile(t, "big.mp4", big), "video: larger than 1048576 bytes (MAX_VIDEO_BYTES)"},
	} {
		for mode, r := range m.both(t, "submit", "--input", tc.path, "--no-validate") {
			if r.code != cli.ExitUsage || !strings.HasPrefix(r.stderr, "dubctl: "+tc.want) {
				t.Errorf("%s mode: %s: exit %d, %q; want %d %q", mode, tc.name, r.code, r.stderr, cli.ExitUsage, tc.want)
			}
		}
		e.nothingLeft(t)
	}
	m.use(t, "database")
	if _, stderr, code := run(t, "submit", "--input", ffmpegVideo(t, 1, false), "--no-validate"); code != 0 {
		t.Fatalf("a video without the probe: exit %d: %s", code, stderr)
	}
}
