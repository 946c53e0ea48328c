package admit

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/engine"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// installed are capabilities as the embedded engines of the test machine
// announce them (apertium-eng-spa and -eng-cat, espeak-ng, pocketsphinx).
func installed(seen time.Time) Capabilities {
	return Capabilities{
		{Step: "asr", Worker: "asr-1", Engine: "pocketsphinx", Languages: []string{"en"}, SeenAt: seen},
		{Step: "translate", Worker: "translate-1", Engine: "apertium", Languages: []string{"ca|en", "en|ca", "en|es", "es|en"}, SeenAt: seen},
		{Step: "tts", Worker: "tts-1", Engine: "espeak", Languages: []string{"ca", "en", "es", "fr"}, SeenAt: seen},
	}
}

func TestCheckRefusesEveryBadRequestWithItsText(t *testing.T) {
	t.Parallel()
	rules := Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: installed(time.Now())}
	var terms1001 strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&terms1001, "term%d,t%d\n", i, i)
	}
	eleven := []string{"es", "ca", "fr", "de", "it", "pt", "nl", "ru", "ja", "ko", "zh"}
	for _, tc := range []struct {
		name string
		req  Request
		want string
		kind Kind
	}{
		{"target xx", Request{Targets: []string{"xx"}}, `target "xx": no translation from en to xx (installed: en→ca, en→es, ca→en, es→en)`, Invalid},
		{"target tlh", Request{Targets: []string{"tlh"}}, `target "tlh": no translation from en to tlh (installed: en→ca, en→es, ca→en, es→en)`, Invalid},
		{"second target xx", Request{Targets: []string{"es,xx"}}, `target "xx": no translation from en to xx`, Invalid},
		{"source zz", Request{Source: "zz"}, `source "zz": no speech recognition for zz (installed: en)`, Invalid},
		{"source = target", Request{Source: "es", Targets: []string{"es"}}, `target "es": the same language as the source (es)`, Invalid},
		{"source = target by region", Request{Source: "en", Targets: []string{"en-GB"}}, `target "en-GB": the same language as the source (en)`, Invalid},
		{"11 targets", Request{Targets: []string{strings.Join(eleven, ",")}}, `target: 11 languages, at most 10`, Invalid},
		{"target twice", Request{Targets: []string{"es", "es"}}, `target "es": named twice`, Invalid},
		{"bad source syntax", Request{Source: "EN!"}, `source "EN!": want a language code such as en, es or pt-BR`, Invalid},
		{"bad target syntax", Request{Targets: []string{"e s"}}, `target "e s": want a language code such as en, es or pt-BR`, Invalid},
		{"speaker with newline", Request{Speaker: "es\n+f3"}, `speaker: want a voice name of at most 64 characters, letters, digits and . _ : + @ - (such as es+f3)`, Invalid},
		{"speaker too long", Request{Speaker: strings.Repeat("v", 201)}, `speaker: want a voice name of at most 64 characters`, Invalid},
		{"glossary 3 fields", Request{Glossary: "source,target\nqueue,cola,extra\n"}, `glossary: line 2: 3 fields, want source,target`, Invalid},
		{"glossary 1001 terms", Request{Glossary: terms1001.String()}, `glossary: 1001 terms, at most 1000`, Invalid},
		{"glossary 201-char term", Request{Glossary: strings.Repeat("a", 201) + ",b\n"}, `glossary: line 1: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"...: 201 characters, at most 200`, Invalid},
		{"glossary not UTF-8", Request{Glossary: "source,target\nqueue,cola\ncaf\xe9,caf\xe9\n"}, `glossary: line 3: not valid UTF-8; save the file as UTF-8`, Invalid},
		{"glossary term twice", Request{Glossary: "\ufeffsource,target\ntry,a\nTRY,b\n"}, `glossary: line 3: source term "TRY" is already on line 2; give each term once`, Invalid},
		{"glossary with an override", Request{Glossary: "try,\u202eab\n"}, `glossary: line 1: target term "\u202eab": U+202E (RIGHT-TO-LEFT OVERRIDE) at character 1: bidirectional overrides and isolates reorder what is shown after them`, Invalid},
		{"glossary over 1 MiB", Request{Glossary: strings.Repeat("#", MaxGlossaryBytes+1)}, `glossary: more than 1048576 bytes`, TooLarge},
		{"review of the voice", Request{Review: []string{"transcript,voice"}}, `review "voice": want transcript, translation or both (transcript,translation)`, Invalid},
		{"review twice", Request{Review: []string{"translation", "translation"}}, `review "translation": named twice`, Invalid},
		{"review of several languages", Request{Targets: []string{"es,ca"}, Review: []string{"transcript"}},
			`review: a task dubbed into several languages at once is not reviewed; submit one language per task to review it`, Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.req, rules)
			e, ok := As(err)
			if !ok || !strings.HasPrefix(err.Error(), tc.want) || e.Kind != tc.kind {
				t.Fatalf("Check(%+v) = %v, want an *Error %q... of kind %v", tc.req, err, tc.want, tc.kind)
			}
		})
	}
}

func TestCheckAdmitsAndFillsIn(t *testing.T) {
	t.Parallel()
	rules := Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: installed(time.Now())}
	got, err := Check(Request{Targets: []string{"es, ca", "", "fr"}, Speaker: "es+f3",
		Glossary: "source,target\n# note\ndubflow,\nqueue,cola\n"}, rules)
	if err == nil {
		t.Fatalf("en→fr has no pair installed, admitted %+v", got)
	}
	got, err = Check(Request{Targets: []string{"es, ca"}, Speaker: "es+f3", Glossary: "source,target\ndubflow,\nqueue,cola\n"}, rules)
	if err != nil || got.Source != "en" || strings.Join(got.Targets, ",") != "es,ca" || len(got.Glossary) != 2 ||
		got.Glossary[1].Target != "cola" {
		t.Fatalf("Check = %+v, %v", got, err)
	}
	if got, err := Check(Request{}, rules); err != nil || got.Targets[0] != "es" || got.Glossary != nil || got.Review != nil {
		t.Fatalf("defaults: %+v, %v", got, err)
	}
	got, err = Check(Request{Review: []string{" translation , transcript", ""}}, rules)
	if err != nil || strings.Join(got.Review, ",") != "transcript,translation" ||
		strings.Join(got.Payload(uuid.New()).Review, ",") != "transcript,translation" {
		t.Fatalf("review: %+v, %v; want both stages in the order a task reaches them, in the payload", got, err)
	}
}

func TestCapabilitiesJudgeOnlyAnnouncedSteps(t *testing.T) {
	t.Parallel()
	now := time.Now()
	// Nothing announced: only the syntax is judged.
	if _, err := Check(Request{Source: "zz", Targets: []string{"tlh"}}, Rules{}); err != nil {
		t.Fatalf("no announcement: %v, want admitted", err)
	}
	// Only tts announced: the languages are judged by their voices alone.
	tts := Capabilities{{Step: "tts", Worker: "w", Languages: []string{"es"}, SeenAt: now}}
	if _, err := Check(Request{Source: "zz", Targets: []string{"es"}}, Rules{Capabilities: tts}); err != nil {
		t.Fatalf("asr and translate never announced: %v, want admitted", err)
	}
	if _, err := Check(Request{Source: "en", Targets: []string{"tlh"}}, Rules{Capabilities: tts}); err == nil ||
		err.Error() != `target "tlh": no voice for tlh (installed: es)` {
		t.Fatalf("tlh without a voice: %v", err)
	}
	// A remote engine that takes any language.
	any := Capabilities{{Step: "translate", Worker: "w", Languages: []string{"*"}, SeenAt: now}}
	if _, err := Check(Request{Source: "en", Targets: []string{"tlh"}}, Rules{Capabilities: any}); err != nil {
		t.Fatalf("any pair: %v", err)
	}
	// A worker that stopped announcing long before the newest one no longer
	// counts; the newest counts however old.
	old := Capabilities{
		{Step: "translate", Worker: "gone", Languages: []string{"en|de"}, SeenAt: now.Add(-24*time.Hour - Window/2)},
		{Step: "translate", Worker: "live", Languages: []string{"en|es"}, SeenAt: now.Add(-24 * time.Hour)},
	}
	if _, err := Check(Request{Source: "en", Targets: []string{"es"}}, Rules{Capabilities: old}); err != nil {
		t.Fatalf("newest announcement, a day old: %v", err)
	}
	if _, err := Check(Request{Source: "en", Targets: []string{"de"}}, Rules{Capabilities: old}); err != nil {
		t.Fatalf("within the window of the newest: %v", err)
	}
	old[1].SeenAt = now.Add(-24*time.Hour + Window)
	if _, err := Check(Request{Source: "en", Targets: []string{"de"}}, Rules{Capabilities: old}); err == nil {
		t.Fatal("a pair only a gone worker announced was admitted")
	}
}

// video makes a video with ffmpeg: with an audio track unless silent.
func video(t *testing.T, seconds string, audio bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "in.mp4")
	args := []string{"-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=10"}
	if audio {
		args = append(args, "-f", "lavfi", "-i", "sine=frequency=440", "-c:a", "aac", "-shortest")
	}
	args = append(args, "-t", seconds, "-c:v", "libx264", "-pix_fmt", "yuv420p", out)
	if b, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, b)
	}
	return out
}

func TestMediaRefusesEveryBadVideoWithItsText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	random := filepath.Join(t.TempDir(), "random.mp4")
	b := make([]byte, 1<<20)
	rand.Read(b)
	if err := os.WriteFile(random, b, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.mp4")
	os.WriteFile(empty, nil, 0o644)
	good := video(t, "2", true)
	fi, _ := os.Stat(good)
	lim := Limits{MaxBytes: 50 << 20, MaxSeconds: 60}
	for _, tc := range []struct {
		name string
		lim  Limits
		path string
		want string
		kind Kind
	}{
		{"random bytes", lim, random, "video: not a media file: the file", Invalid},
		{"empty", lim, empty, "video: empty file", Invalid},
		{"no audio", lim, video(t, "2", false), "video: no audio stream (nothing to dub)", Invalid},
		{"over MAX_VIDEO_SECONDS", Limits{MaxBytes: 50 << 20, MaxSeconds: 1}, good, "video: 2s long, at most 1s (MAX_VIDEO_SECONDS=1)", TooLarge},
		{"over MAX_VIDEO_BYTES", Limits{MaxBytes: fi.Size() - 1, MaxSeconds: 60}, good,
			fmt.Sprintf("video: larger than %d bytes (MAX_VIDEO_BYTES)", fi.Size()-1), TooLarge},
		{"missing", lim, filepath.Join(t.TempDir(), "none.mp4"), "video: cannot read the file", Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.lim.Media(ctx, tc.path)
			e, ok := As(err)
			if !ok || err.Error() != tc.want || e.Kind != tc.kind || strings.Contains(err.Error(), tc.path) {
				t.Fatalf("Media = %v, want %q of kind %v", err, tc.want, tc.kind)
			}
		})
	}
	if info, err := lim.Media(ctx, good); err != nil || info.Duration < time.Second {
		t.Fatalf("a good video: %v, %v", info, err)
	}
}

func TestAnnouncementsAreLoadedAndRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	if err := engine.Announce(ctx, db.Pool, engine.Capability{Step: "translate", Worker: "w1", Engine: "apertium", Languages: []string{"en|es"}}); err != nil {
		t.Fatal(err)
	}
	if err := engine.Announce(ctx, db.Pool, engine.Capability{Step: "translate", Worker: "w1", Engine: "apertium", Languages: []string{"en|es", "en|ca"}}); err != nil {
		t.Fatal(err)
	}
	if err := engine.Announce(ctx, db.Pool, engine.Capability{Step: "mux_video", Worker: "w1"}); err == nil {
		t.Fatal("a step without languages was announced")
	}
	// A row no worker renewed for over a week is forgotten.
	if _, err := db.Pool.Exec(ctx, `INSERT INTO engine_capabilities (step, worker, engine, languages, seen_at)
		VALUES ('tts', 'old', 'espeak', '["tlh"]', now() - interval '8 days')`); err != nil {
		t.Fatal(err)
	}
	caps, err := LoadCapabilities(ctx, db.Pool)
	if err != nil || len(caps) != 1 || caps[0].Worker != "w1" || strings.Join(caps[0].Languages, ",") != "en|es,en|ca" {
		t.Fatalf("loaded %+v, %v", caps, err)
	}
	if err := Languages("en", []string{"xx"}, caps); err == nil || !strings.HasPrefix(err.Error(), `target "xx": no translation from en to xx`) {
		t.Fatalf("xx with the loaded capabilities: %v", err)
	}
	if err := engine.Announce(ctx, db.Pool, engine.Capability{Step: "asr", Worker: "a1", Engine: "pocketsphinx", Languages: []string{"en"}}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM engine_capabilities WHERE worker = 'old'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("old rows: %d, %v, want removed", n, err)
	}
}

func TestGlossaryFileIsReadAndBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	small, big := filepath.Join(dir, "g.csv"), filepath.Join(dir, "big.csv")
	os.WriteFile(small, []byte("queue,cola\n"), 0o644)
	os.WriteFile(big, []byte(strings.Repeat("#", MaxGlossaryBytes+1)), 0o644)
	if text, err := GlossaryFile(small); err != nil || text != "queue,cola\n" {
		t.Fatalf("GlossaryFile = %q, %v", text, err)
	}
	if text, err := GlossaryFile(""); err != nil || text != "" {
		t.Fatalf("no file: %q, %v", text, err)
	}
	if _, err := GlossaryFile(big); kindOf(err) != TooLarge || err.Error() != "glossary: more than 1048576 bytes" {
		t.Fatalf("big file: %v", err)
	}
	if _, err := GlossaryFile(filepath.Join(dir, "none.csv")); kindOf(err) != Invalid || err.Error() != "glossary: cannot read the file" {
		t.Fatalf("missing file: %v", err)
	}
}

// kindOf returns the kind of a refusal, 0 for another error.
func kindOf(err error) Kind {
	if e, ok := As(err); ok {
		return e.Kind
	}
	return 0
}

// TestGlossaryOfAPayload: terms that arrive parsed are held to the CSV's
// rules, with the term's position.
func TestGlossaryOfAPayload(t *testing.T) {
	t.Parallel()
	if err := Glossary(nil); err != nil {
		t.Fatal(err)
	}
	err := Glossary([]wire.Term{{Source: "ok"}, {Source: "evil\u202e", Target: "x"}})
	if e, ok := As(err); !ok || e.Kind != Invalid ||
		err.Error() != `glossary: term 2: source term "evil\u202e": U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5: bidirectional overrides and isolates reorder what is shown after them` {
		t.Fatalf("Glossary = %v", err)
	}
}

// TestFileChecksTheContainerWithoutFFprobe: what a door checks without
// ffprobe admits the containers ffmpeg writes and refuses text, an image,
// random bytes, an empty or too large file.
func TestFileChecksTheContainerWithoutFFprobe(t *testing.T) {
	t.Parallel()
	good := video(t, "1", true)
	lim := Limits{MaxBytes: 50 << 20}
	for _, ext := range []string{"mkv", "webm", "avi", "ts", "mov", "flv", "mpg", "ogv"} {
		out := filepath.Join(t.TempDir(), "v."+ext)
		args := []string{"-hide_banner", "-loglevel", "error", "-i", good, "-t", "1", "-r", "25", out}
		if b, err := exec.Command("ffmpeg", args...).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg %s: %v: %s", ext, err, b)
		}
		if err := lim.File(out); err != nil {
			t.Errorf("%s: %v", ext, err)
		}
	}
	if err := lim.File(good); err != nil {
		t.Errorf("mp4: %v", err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	random := make([]byte, 4096)
	rand.Read(random)
	random[0] = 0 // not by chance a sync byte
	fi, _ := os.Stat(good)
	for name, tc := range map[string]struct {
		lim  Limits
		path string
		want string
	}{
		"text":         {lim, write("notes.mp4", []byte("just some text, not a video\n")), "video: not a media container dubflow knows"},
		"png":          {lim, write("a.mp4", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")), "video: not a media container dubflow knows"},
		"random bytes": {lim, write("r.mp4", random), "video: not a media container dubflow knows"},
		"empty":        {lim, write("e.mp4", nil), "video: empty file"},
		"too large":    {Limits{MaxBytes: fi.Size() - 1}, good, "video: larger than"},
	} {
		if err := tc.lim.File(tc.path); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q...", name, err, tc.want)
		}
	}
}

// TestSpeakerIsJudgedByTheAnnouncedVoices: a speaker must be a voice a tts
// engine announced — its name and its variant, without regard to case —
// unless no engine announced voices or one takes any; the voices are kept
// and loaded with the announcement.
func TestSpeakerIsJudgedByTheAnnouncedVoices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	if err := engine.Announce(ctx, db.Pool, engine.Capability{Step: "tts", Worker: "t1", Engine: "espeak", Languages: []string{"en", "es"},
		Voices: []string{"en-us", "es", "es-419", "+m3", "+f3"}}); err != nil {
		t.Fatal(err)
	}
	caps, err := LoadCapabilities(ctx, db.Pool)
	if err != nil || len(caps) != 1 || len(caps[0].Voices) != 5 {
		t.Fatalf("loaded %+v, %v", caps, err)
	}
	for _, ok := range []string{"", "default", "es", "es+m3", "ES+F3", "en-us", "es-419+m3"} {
		if _, err := Check(Request{Targets: []string{"es"}, Speaker: ok}, Rules{DefaultSource: "en", Capabilities: caps}); err != nil {
			t.Errorf("speaker %q: %v, want admitted", ok, err)
		}
	}
	for speaker, want := range map[string]string{
		"zz9+nonexistent": `speaker "zz9+nonexistent": no such voice (installed: en-us, es, es-419; variants: +f3, +m3)`,
		"es+nonexistent":  `speaker "es+nonexistent": no such voice (installed: en-us, es, es-419; variants: +f3, +m3)`,
		"de":              `speaker "de": no such voice`,
	} {
		_, err := Check(Request{Targets: []string{"es"}, Speaker: speaker}, Rules{DefaultSource: "en", Capabilities: caps})
		if e, ok := As(err); !ok || e.Kind != Invalid || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("speaker %q: %v, want %s (invalid)", speaker, err, want)
		}
	}
	// Without voices announced (an older worker), or with an engine that
	// takes any name, the speaker is not judged.
	now := time.Now()
	for name, c := range map[string]Capabilities{
		"no voices": {{Step: "tts", Worker: "old", Languages: []string{"es"}, SeenAt: now}},
		"any voice": {{Step: "tts", Worker: "remote", Languages: []string{"*"}, Voices: []string{"*"}, SeenAt: now},
			{Step: "tts", Worker: "espeak", Languages: []string{"es"}, Voices: []string{"es"}, SeenAt: now}},
	} {
		if err := Speaker("zz9+nonexistent", c); err != nil {
			t.Errorf("%s: %v, want the speaker not judged", name, err)
		}
	}
}
