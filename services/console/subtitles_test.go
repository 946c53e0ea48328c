package main

import (
	"bytes"
	"context"
	"mime/multipart"
	"net/http"
	"os"
	"reflect"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
)

// subtitleFields are a bad case's form or JSON fields.
func subtitleFields(c admittest.BadSubtitle) map[string]string {
	fields := map[string]string{}
	for k, v := range map[string]string{"subtitles": c.Subtitles, "subtitlesLanguage": c.Language, "sourceSubtitles": c.SourceSubtitles,
		"burnSubtitles": c.Burn, "target": c.Targets} {
		if v != "" {
			fields[k] = v
		}
	}
	return fields
}

// kindStatus is the HTTP status of a refusal's kind.
func kindStatus(k admit.Kind) int {
	switch k {
	case admit.TooLarge:
		return http.StatusRequestEntityTooLarge
	case admit.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// TestEveryDoorRefusesTheSameBadSubtitles runs the table of malformed
// subtitle files and settings (admittest.BadSubtitles) through the
// console's two doors: each answers the status of the refusal's kind and
// pkg/admit's text, line number and all, and leaves no task, object
// (subtitles/ included) or message behind.
func TestEveryDoorRefusesTheSameBadSubtitles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: admittest.AnnounceInstalled(t, f.pool)}
	video := sampleVideo(t, "1")
	info, err := f.srv.limits().Media(context.Background(), video)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range admittest.BadSubtitles {
		want := tc.Refusal(rules, info.Duration)
		if want == nil {
			t.Fatalf("%s: pkg/admit admits it", tc.Name)
		}
		for _, d := range []struct {
			name string
			send door
		}{{"multipart", multipartDoor}, {"presigned", presignedDoor}} {
			if d.name == "presigned" && tc.NotJSON() {
				continue // JSON carries no bytes that are not UTF-8
			}
			t.Run(d.name+"/"+tc.Name, func(t *testing.T) {
				status, msg := d.send(t, f, video, subtitleFields(tc))
				if status != kindStatus(tc.Kind) || msg != want.Error() {
					t.Fatalf("%d %q, want %d %q", status, msg, kindStatus(tc.Kind), want.Error())
				}
				f.nothingLeft(t)
			})
		}
	}
}

// TestSubtitlesAreStoredWithThePlan: a task from a subtitle file (a file
// part) in the target language, with the source text and burned-in
// subtitles, stores both files under subtitles/{id}/, records its plan
// (asr and translate skipped) and names the files in its first message.
func TestSubtitlesAreStoredWithThePlan(t *testing.T) {
	t.Parallel()
	f := setup(t)
	admittest.AnnounceInstalled(t, f.pool)
	ctx := context.Background()
	file, source := "WEBVTT\n\n00:00.100 --> 00:00.900\n<v Ana>Hola.\n", "1\n00:00:00,100 --> 00:00:00,900\nHello.\n"
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range map[string]string{"subtitlesLanguage": "es", "burnSubtitles": "bilingual"} {
		_ = mw.WriteField(k, v)
	}
	for name, text := range map[string]string{"subtitles": file, "sourceSubtitles": source} {
		part, _ := mw.CreateFormFile(name, name+".txt")
		part.Write([]byte(text))
	}
	part, _ := mw.CreateFormFile("video", "in.mp4")
	b, _ := os.ReadFile(sampleVideo(t, "1"))
	part.Write(b)
	mw.Close()
	var c created
	decode(t, f.do(t, "POST", "/api/tasks", adminToken, mw.FormDataContentType(), &buf), http.StatusCreated, &c)
	keys := map[string]string{"subtitles/" + c.TaskID.String() + "/subtitles.vtt": file, "subtitles/" + c.TaskID.String() + "/source.srt": source}
	for key, text := range keys {
		got, err := f.srv.objects.Get(ctx, key, 1<<20)
		if err != nil || string(got) != text {
			t.Fatalf("%s: %q, %v; want %q", key, got, err, text)
		}
	}
	plan, err := task.LoadPlan(ctx, f.pool, c.TaskID)
	want := task.Plan{Skipped: []string{"asr", "translate"}, SubtitlesKey: "subtitles/" + c.TaskID.String() + "/subtitles.vtt",
		SubtitlesLanguage: "es", SourceSubtitlesKey: "subtitles/" + c.TaskID.String() + "/source.srt", BurnSubtitles: "bilingual"}
	if err != nil || !reflect.DeepEqual(plan, want) {
		t.Fatalf("plan %+v, %v; want %+v", plan, err, want)
	}
	msg, ok, err := f.ch.Get(wire.RoutingKey(wire.StepExtractAudio), true)
	if err != nil || !ok {
		t.Fatalf("no extract_audio message (%v)", err)
	}
	env, err := wire.Decode(msg.Body)
	var p wire.ExtractAudio
	if err == nil {
		err = env.UnmarshalPayload(&p)
	}
	if err != nil || p.SubtitlesKey != want.SubtitlesKey || p.SourceSubtitlesKey != want.SourceSubtitlesKey ||
		p.SubtitlesLanguage != "es" || p.BurnSubtitles != "bilingual" {
		t.Fatalf("message payload %+v, %v", p, err)
	}
}
