package main

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
	"github.com/minio/minio-go/v7"
)

// TestSubmitRefusesTheSameBadSubtitlesInBothModes runs the table of
// malformed subtitle files and settings (admittest.BadSubtitles, the one
// the console's doors and extract_audio run) through dubctl submit with a
// database and through the console: each exits 2 with pkg/admit's text,
// line number and all, and leaves no task, object or message behind.
func TestSubmitRefusesTheSameBadSubtitlesInBothModes(t *testing.T) {
	e := setup(t)
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: admittest.AnnounceInstalled(t, e.db.Pool)}
	m := &modes{e: e, console: startConsole(t, e)}
	video := ffmpegVideo(t, 1, false)
	info, err := admit.Limits{}.Media(context.Background(), video)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range admittest.BadSubtitles {
		want := tc.Refusal(rules, info.Duration)
		if want == nil {
			t.Fatalf("%s: pkg/admit admits it", tc.Name)
		}
		args := []string{"submit", "--input", video}
		if tc.Subtitles != "" {
			file := writeFile(t, "in.srt", []byte(tc.Subtitles))
			if tc.Language != "" {
				file += ":" + tc.Language
			}
			args = append(args, "--subtitles", file)
		}
		if tc.SourceSubtitles != "" {
			args = append(args, "--source-subtitles", writeFile(t, "source.srt", []byte(tc.SourceSubtitles)))
		}
		for _, f := range [][2]string{{"--target", tc.Targets}, {"--burn-subtitles", tc.Burn}} {
			if f[1] != "" {
				args = append(args, f[0], f[1])
			}
		}
		for _, mode := range modeNames {
			t.Run(mode+"/"+tc.Name, func(t *testing.T) {
				m.use(t, mode)
				_, stderr, code := run(t, args...)
				if code != cli.ExitUsage || !strings.HasPrefix(stderr, "dubctl: "+want.Error()) {
					t.Fatalf("exit %d, stderr %q; want exit %d with %q", code, stderr, cli.ExitUsage, want.Error())
				}
				e.nothingLeft(t)
			})
		}
	}
	// An empty file is refused, not taken for none.
	for mode, r := range m.both(t, "submit", "--input", video, "--subtitles", writeFile(t, "empty.vtt", nil)) {
		if r.code != cli.ExitUsage || !strings.HasPrefix(r.stderr, "dubctl: subtitles: no cues: the file is empty") {
			t.Errorf("%s mode: empty file: exit %d, %q", mode, r.code, r.stderr)
		}
	}
}

// TestSubmitWithSubtitlesInBothModes: --subtitles FILE:LANG,
// --source-subtitles and --burn-subtitles make the same task in both
// modes: the files under subtitles/{id}/ and the plan that skips asr and
// translate.
func TestSubmitWithSubtitlesInBothModes(t *testing.T) {
	e := setup(t)
	admittest.AnnounceInstalled(t, e.db.Pool)
	m := &modes{e: e, console: startConsole(t, e)}
	video := ffmpegVideo(t, 1, false)
	file := writeFile(t, "es.vtt", []byte("WEBVTT\n\n00:00.100 --> 00:00.900\nHola.\n"))
	source := writeFile(t, "en.srt", []byte("1\n00:00:00,100 --> 00:00:00,900\nHello.\n"))
	ctx := context.Background()
	for mode, r := range m.both(t, "submit", "--input", video, "--subtitles", file+":es", "--source-subtitles", source,
		"--burn-subtitles", "target") {
		id, err := uuid.Parse(strings.TrimSpace(r.stdout))
		if r.code != 0 || err != nil {
			t.Fatalf("%s mode: exit %d, %q %q", mode, r.code, r.stdout, r.stderr)
		}
		plan, err := task.LoadPlan(ctx, e.db.Pool, id)
		want := task.Plan{Skipped: []string{"asr", "translate"}, SubtitlesKey: "subtitles/" + id.String() + "/subtitles.vtt",
			SubtitlesLanguage: "es", SourceSubtitlesKey: "subtitles/" + id.String() + "/source.srt", BurnSubtitles: "target"}
		if err != nil || !reflect.DeepEqual(plan, want) {
			t.Fatalf("%s mode: plan %+v, %v; want %+v", mode, plan, err, want)
		}
		for _, key := range []string{want.SubtitlesKey, want.SourceSubtitlesKey} {
			if _, err := e.bucket.Client.StatObject(ctx, e.bucket.Name, key, minio.StatObjectOptions{}); err != nil {
				t.Fatalf("%s mode: %s: %v", mode, key, err)
			}
		}
	}
}
