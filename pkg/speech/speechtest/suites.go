package speechtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
)

// WAV returns d of 16 kHz mono 16-bit audio as WAV bytes: a square-wave
// tone, or zeros when silent.
func WAV(d time.Duration, silent bool) []byte {
	n := int(d * 16000 / time.Second)
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+2*n))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], 16000)
	binary.LittleEndian.PutUint32(b[28:], 32000)
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(2*n))
	if !silent {
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint16(b[44+2*i:], uint16(int16(3000*((i/20)%2*2-1))))
		}
	}
	return b
}

// WriteSilence writes d of 16 kHz mono 16-bit zeros as a WAV file in a
// temporary folder of the test and returns its path.
func WriteSilence(t testing.TB, d time.Duration) string {
	t.Helper()
	b := WAV(d, true)
	p := filepath.Join(t.TempDir(), "silence.wav")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TranscriberSuite checks a Transcriber on real speech and on silence.
type TranscriberSuite struct {
	// Engine is the recogniser under test.
	Engine speech.Transcriber
	// Speech is a 16 kHz mono WAV of Language speech, Reference what is
	// said in it, and MaxWER the highest word error rate accepted.
	Speech, Reference, Language string
	MaxWER                      float64
	// Unsupported is a language the engine must refuse permanently; ""
	// skips that check.
	Unsupported string
}

// Run runs the suite as subtests of t.
func (s TranscriberSuite) Run(t *testing.T) {
	t.Run("speech", s.speech)
	t.Run("silence", s.silence)
	if s.Unsupported != "" {
		t.Run("unsupported language", s.unsupported)
	}
	t.Run("not a wav", s.notWAV)
	t.Run("canceled", s.canceled)
}

// speech transcribes Speech: a timeline that holds, within MaxWER of
// Reference.
func (s TranscriberSuite) speech(t *testing.T) {
	segs, err := s.Engine.Transcribe(context.Background(), s.Speech, s.Language)
	if err != nil {
		t.Fatalf("Transcribe: %v", err)
	}
	if len(segs) == 0 {
		t.Fatal("no segments for speech")
	}
	wav, err := os.ReadFile(s.Speech)
	if err != nil {
		t.Fatal(err)
	}
	dur, err := speech.WAVDuration(wav)
	if err != nil {
		t.Fatal(err)
	}
	CheckTimeline(t, segs, dur)
	var texts []string
	for _, sg := range segs {
		texts = append(texts, sg.Text)
	}
	hyp := strings.Join(texts, " ")
	wer := WER(s.Reference, hyp)
	t.Logf("WER %.3f: %q", wer, hyp)
	if wer > s.MaxWER {
		t.Errorf("word error rate %.3f > %.3f", wer, s.MaxWER)
	}
}

// silence gives no segments.
func (s TranscriberSuite) silence(t *testing.T) {
	segs, err := s.Engine.Transcribe(context.Background(), WriteSilence(t, 3*time.Second), s.Language)
	if err != nil {
		t.Fatalf("Transcribe: %v", err)
	}
	if len(segs) != 0 {
		t.Errorf("silence gave %d segments: %+v", len(segs), segs)
	}
}

// unsupported refuses the Unsupported language permanently.
func (s TranscriberSuite) unsupported(t *testing.T) {
	_, err := s.Engine.Transcribe(context.Background(), s.Speech, s.Unsupported)
	CheckUnsupported(t, err)
}

// notWAV fails on a file that is not audio.
func (s TranscriberSuite) notWAV(t *testing.T) {
	p := filepath.Join(t.TempDir(), "junk.wav")
	if err := os.WriteFile(p, []byte("<html>not audio</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Engine.Transcribe(context.Background(), p, s.Language); err == nil {
		t.Error("junk input transcribed without error")
	}
}

// canceled fails under a canceled context.
func (s TranscriberSuite) canceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Engine.Transcribe(ctx, s.Speech, s.Language); err == nil {
		t.Error("a canceled context gave no error")
	}
}

// CheckTimeline checks that segments are in order, do not overlap, lie
// inside [0, dur], have text, and hold their words.
func CheckTimeline(t testing.TB, segs []speech.Segment, dur time.Duration) {
	t.Helper()
	end := int(dur.Milliseconds()) + 50
	prev := 0
	for i, s := range segs {
		if s.StartMS < prev || s.EndMS <= s.StartMS || s.EndMS > end {
			t.Errorf("segment %d [%d, %d] ms outside order or audio (previous end %d, audio %d ms)", i, s.StartMS, s.EndMS, prev, end-50)
		}
		if strings.TrimSpace(s.Text) == "" {
			t.Errorf("segment %d has no text", i)
		}
		for _, w := range s.Words {
			if w.StartMS < s.StartMS || w.EndMS > s.EndMS || w.EndMS < w.StartMS || w.Text == "" {
				t.Errorf("segment %d [%d, %d]: word %+v outside it", i, s.StartMS, s.EndMS, w)
			}
			if w.Confidence < 0 || w.Confidence > 1 {
				t.Errorf("segment %d: word %+v confidence outside [0, 1]", i, w)
			}
		}
		prev = s.EndMS
	}
}

// CheckUnsupported checks that err is a permanent ErrUnsupportedLanguage.
func CheckUnsupported(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, speech.ErrUnsupportedLanguage) || !fault.IsPermanent(err) {
		t.Errorf("want a permanent ErrUnsupportedLanguage, got %v", err)
	}
}

// TranslatorSuite checks a Translator on one line, a numbered batch and
// empty input.
type TranslatorSuite struct {
	// Engine is the translator under test; From and To a pair it knows.
	Engine   speech.Translator
	From, To string
	// Unsupported is a pair the engine must refuse permanently; zero
	// skips that check.
	Unsupported [2]string
}

// Run runs the suite as subtests of t.
func (s TranslatorSuite) Run(t *testing.T) {
	t.Run("one line", s.oneLine)
	t.Run("batch keeps count and order", s.batch)
	t.Run("empty", s.empty)
	t.Run("tricky text", s.tricky)
	if s.Unsupported != [2]string{} {
		t.Run("unsupported pair", s.unsupported)
	}
}

// oneLine translates one line into something else.
func (s TranslatorSuite) oneLine(t *testing.T) {
	got, err := s.Engine.Translate(context.Background(), []string{"Hello world, how are you today?"}, s.From, s.To)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	if len(got) != 1 || strings.TrimSpace(got[0]) == "" || got[0] == "Hello world, how are you today?" {
		t.Errorf("got %q", got)
	}
}

// batch translates 20 numbered lines, each in its place.
func (s TranslatorSuite) batch(t *testing.T) {
	in := make([]string, 20)
	for i := range in {
		in[i] = fmt.Sprintf("The house number %d is big and the dog is black.", 100+i)
	}
	got, err := s.Engine.Translate(context.Background(), in, s.From, s.To)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d lines in, %d out", len(in), len(got))
	}
	for i, g := range got {
		if !strings.Contains(g, fmt.Sprint(100+i)) || g == in[i] {
			t.Errorf("line %d: %q does not translate %q", i, g, in[i])
		}
	}
}

// empty keeps no input empty and blank texts blank.
func (s TranslatorSuite) empty(t *testing.T) {
	ctx := context.Background()
	got, err := s.Engine.Translate(ctx, nil, s.From, s.To)
	if err != nil || len(got) != 0 {
		t.Errorf("nil input: %q, %v", got, err)
	}
	got, err = s.Engine.Translate(ctx, []string{"", "Good morning.", "  "}, s.From, s.To)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	if len(got) != 3 || got[0] != "" || got[1] == "" || strings.TrimSpace(got[2]) != "" {
		t.Errorf("blank texts: got %q", got)
	}
}

// tricky translates texts that look like flags, breaks and patterns.
func (s TranslatorSuite) tricky(t *testing.T) {
	in := []string{"-v es --help", "a line\nwith a break", "[[1]] ^a$ <b> {c} \\d"}
	got, err := s.Engine.Translate(context.Background(), in, s.From, s.To)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	if len(got) != len(in) {
		t.Fatalf("%d lines in, %d out: %q", len(in), len(got), got)
	}
	for i, g := range got {
		if strings.TrimSpace(g) == "" {
			t.Errorf("line %d %q: empty translation", i, in[i])
		}
	}
}

// unsupported refuses the Unsupported pair permanently.
func (s TranslatorSuite) unsupported(t *testing.T) {
	_, err := s.Engine.Translate(context.Background(), []string{"Hello"}, s.Unsupported[0], s.Unsupported[1])
	CheckUnsupported(t, err)
}

// SynthesizerSuite checks a Synthesizer's output.
type SynthesizerSuite struct {
	// Engine is the synthesizer under test; Language and Voice a
	// combination it knows (Voice may be "").
	Engine          speech.Synthesizer
	Language, Voice string
	// Unsupported is a language the engine must refuse permanently; ""
	// skips that check.
	Unsupported string
}

// Run runs the suite as subtests of t.
func (s SynthesizerSuite) Run(t *testing.T) {
	ctx := context.Background()
	t.Run("line", func(t *testing.T) {
		a, err := s.Engine.Synthesize(ctx, speech.SynthesisRequest{Text: "Hola, ¿cómo estás? Esto es una prueba.", Language: s.Language, Voice: s.Voice})
		if err != nil {
			t.Fatalf("Synthesize: %v", err)
		}
		d := CheckAudio(t, a)
		if d < 500*time.Millisecond || d > 20*time.Second {
			t.Errorf("duration %v for a short line", d)
		}
	})
	t.Run("text like an option", func(t *testing.T) {
		a, err := s.Engine.Synthesize(ctx, speech.SynthesisRequest{Text: "-w /tmp/x.wav --help", Language: s.Language, Voice: s.Voice})
		if err != nil {
			t.Fatalf("Synthesize: %v", err)
		}
		CheckAudio(t, a)
	})
	t.Run("blank text is silence", func(t *testing.T) {
		a, err := s.Engine.Synthesize(ctx, speech.SynthesisRequest{Text: "  ", Language: s.Language, Voice: s.Voice, TargetDuration: time.Second})
		if err != nil {
			t.Fatalf("Synthesize: %v", err)
		}
		if d := CheckAudio(t, a); d != time.Second {
			t.Errorf("silence of %v, want 1s", d)
		}
	})
	if s.Unsupported != "" {
		t.Run("unsupported language", func(t *testing.T) {
			_, err := s.Engine.Synthesize(ctx, speech.SynthesisRequest{Text: "hello", Language: s.Unsupported})
			CheckUnsupported(t, err)
		})
	}
}

// CheckAudio checks that a is a WAV with sound and parameters, and
// returns its duration.
func CheckAudio(t testing.TB, a *speech.Audio) time.Duration {
	t.Helper()
	if a == nil {
		t.Fatal("nil audio")
	}
	d, err := speech.WAVDuration(a.WAV)
	if err != nil {
		t.Fatalf("output is not a WAV: %v", err)
	}
	if len(a.Params) == 0 {
		t.Error("no params recorded")
	}
	return d
}
