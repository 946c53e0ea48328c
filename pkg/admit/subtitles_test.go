package admit_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/admit/admittest"
	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// english are capabilities of engines that hear English only, translate
// en→es and speak en, es and de.
func english(seen time.Time) admit.Capabilities {
	return admit.Capabilities{
		{Step: "asr", Worker: "asr-1", Engine: "pocketsphinx", Languages: []string{"en"}, SeenAt: seen},
		{Step: "translate", Worker: "translate-1", Engine: "apertium", Languages: []string{"en|es"}, SeenAt: seen},
		{Step: "tts", Worker: "tts-1", Engine: "espeak", Languages: []string{"de", "en", "es"}, SeenAt: seen},
	}
}

// TestBadSubtitlesAreRefusedWithTheirLine: every case of the doors' table
// is refused by Check (or, for a cue past the video, FitVideo) with its
// text and kind.
func TestBadSubtitlesAreRefusedWithTheirLine(t *testing.T) {
	t.Parallel()
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: english(time.Now())}
	for _, tc := range admittest.BadSubtitles {
		t.Run(tc.Name, func(t *testing.T) {
			err := tc.Refusal(rules, 5*time.Second)
			e, ok := admit.As(err)
			if !ok || !strings.HasPrefix(err.Error(), tc.Text) || e.Kind != tc.Kind {
				t.Fatalf("refusal %v, want %s %q...", err, tc.Kind, tc.Text)
			}
		})
	}
}

// TestSubtitlesInTheSourceSkipAsr: a source-language file skips asr (its
// engine is not judged), keeps its cues and names its key in the payload.
func TestSubtitlesInTheSourceSkipAsr(t *testing.T) {
	t.Parallel()
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: english(time.Now())}
	file := "WEBVTT\n\n00:00.500 --> 00:02.000\n<v Anna>Guten Tag.\n"
	if _, err := admit.Check(admit.Request{Source: "de", Targets: []string{"en"}}, rules); err == nil ||
		!strings.Contains(err.Error(), "no speech recognition for de") {
		t.Fatalf("German without subtitles: %v, want no speech recognition", err)
	}
	_, err := admit.Check(admit.Request{Source: "de", Targets: []string{"es"}, Subtitles: file}, rules)
	if err == nil || !strings.Contains(err.Error(), "no translation from de to es") {
		t.Fatalf("German subtitles into es: %v, want the translation still judged", err)
	}
	rules.Capabilities = append(rules.Capabilities, engine.Capability{Step: "translate", Worker: "t2", Languages: []string{"de|es"}, SeenAt: time.Now()})
	task, err := admit.Check(admit.Request{Source: "de", Targets: []string{"es"}, Subtitles: file, BurnSubtitles: "bilingual"}, rules)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	p := task.Payload(id)
	want := wire.ExtractAudio{SourceVideoKey: wire.DefaultKeys(id).SourceVideo, OutputAudioKey: wire.DefaultKeys(id).SourceAudio,
		SourceLanguage: "de", TargetLanguage: "es", SubtitlesKey: "subtitles/" + id.String() + "/subtitles.vtt", SubtitlesLanguage: "de",
		BurnSubtitles: "bilingual"}
	if !reflect.DeepEqual(p, want) || !reflect.DeepEqual(task.Skipped(), []string{"asr"}) ||
		!reflect.DeepEqual(task.Subtitles.Cues, []subtitle.Cue{{StartMS: 500, EndMS: 2000, Text: "Guten Tag.", Speaker: "Anna"}}) {
		t.Fatalf("payload %+v, skipped %v, cues %+v", p, task.Skipped(), task.Subtitles.Cues)
	}
	files := task.SubtitleFiles(id)
	if len(files) != 1 || files[0] != (admit.File{Key: p.SubtitlesKey, Text: file, ContentType: "text/vtt"}) {
		t.Fatalf("files %+v", files)
	}
	if err := task.FitVideo(1500 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "past the end of the video (00:00:01.500)") {
		t.Fatalf("FitVideo(1.5 s) = %v", err)
	}
	if err := task.FitVideo(2 * time.Second); err != nil {
		t.Fatalf("FitVideo(2 s) = %v", err)
	}
}

// TestSubtitlesInTheTargetSkipAsrAndTranslate: a target-language file
// skips asr and translate (neither judged); its second file is stored
// beside it.
func TestSubtitlesInTheTargetSkipAsrAndTranslate(t *testing.T) {
	t.Parallel()
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: english(time.Now())}
	file, source := "1\n00:00:00,500 --> 00:00:02,000\nGuten Tag.\n", "1\n00:00:00,500 --> 00:00:02,000\nBonjour.\n"
	task, err := admit.Check(admit.Request{Source: "fr", Targets: []string{"de"}, Subtitles: file, SubtitlesLanguage: "de",
		SourceSubtitles: source}, rules)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	p := task.Payload(id)
	if !reflect.DeepEqual(task.Skipped(), []string{"asr", "translate"}) || p.SubtitlesLanguage != "de" ||
		p.SourceSubtitlesKey != "subtitles/"+id.String()+"/source.srt" || p.SubtitlesKey != "subtitles/"+id.String()+"/subtitles.srt" {
		t.Fatalf("skipped %v, payload %+v", task.Skipped(), p)
	}
	if files := task.SubtitleFiles(id); len(files) != 2 || files[1].Text != source || files[1].ContentType != "application/x-subrip" {
		t.Fatalf("files %+v", files)
	}
	if _, err := admit.Check(admit.Request{Source: "fr", Targets: []string{"it"}, Subtitles: file, SubtitlesLanguage: "it"}, rules); err == nil ||
		!strings.Contains(err.Error(), `target "it": no voice for it`) {
		t.Fatalf("no voice for the target: %v", err)
	}
}

// TestSubtitlesFileIsReadAndBounded: dubctl's file reader refuses an
// empty file and one over the limit with Check's texts.
func TestSubtitlesFileIsReadAndBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty, big := filepath.Join(dir, "empty.srt"), filepath.Join(dir, "big.srt")
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(big, make([]byte, admit.MaxSubtitlesBytes+1), 0o600)
	if _, err := admit.SubtitlesFile(admit.FieldSubtitles, empty); err == nil || err.Error() != "subtitles: no cues: the file is empty" {
		t.Errorf("empty: %v", err)
	}
	if _, err := admit.SubtitlesFile(admit.FieldSubtitles, big); err == nil || err.Error() != "subtitles: more than 1048576 bytes" {
		t.Errorf("big: %v", err)
	}
	if _, err := admit.SubtitlesFile(admit.FieldSourceSubtitles, filepath.Join(dir, "missing.srt")); err == nil ||
		err.Error() != "source subtitles: cannot read the file" {
		t.Errorf("missing: %v", err)
	}
}
