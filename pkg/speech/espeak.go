package speech

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// Speaking rates of Espeak, in words per minute.
const (
	EspeakDefaultWPM = 175
	EspeakMinWPM     = 80
	EspeakMaxWPM     = 370
)

// Espeak is the embedded synthesizer: it runs espeak-ng (Debian package
// espeak-ng), which writes a 22.05 kHz mono WAV. The text goes in on
// standard input, never on the command line, so a line such as "-v xx"
// is spoken, not parsed.
//
// When the request has a TargetDuration and the line spoken at the default
// rate is longer, Espeak speaks it again faster, at a rate estimated from
// the first take (words per minute scale about inversely with duration),
// bounded by MaxWPM. It never slows down to fill a longer slot: the timing
// step pads instead.
type Espeak struct {
	// Command is the program to run; "espeak-ng" when empty.
	Command string
	// DefaultWPM, MaxWPM: the first-take and the fastest rate;
	// EspeakDefaultWPM and EspeakMaxWPM when zero.
	DefaultWPM, MaxWPM int
	// Voice is used when a request names none ("default" counts as none);
	// when empty too, the request's language picks the voice.
	Voice string
}

// NewEspeak returns an Espeak with the defaults.
func NewEspeak() *Espeak { return &Espeak{} }

// validVoice admits espeak-ng voice names such as "es", "en-us",
// "en-us+f3", "gmw/en-US"; nothing that could be read as an option.
var validVoice = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_+/-]*$`).MatchString

// Synthesize implements Synthesizer. Params records voice, rate_wpm,
// takes, default_duration_ms, duration_ms and target_duration_ms.
func (e *Espeak) Synthesize(ctx context.Context, req SynthesisRequest) (*Audio, error) {
	if a := silentFor(req, "espeak-ng"); a != nil {
		return a, nil
	}
	voice := req.Voice
	if voice == "" || voice == "default" {
		voice = e.Voice
	}
	voice = espeakVoice(voice, req.Language)
	if !validVoice(voice) {
		return nil, fault.Permanent(fmt.Errorf("espeak-ng: voice %q is not a voice name (TTS_VOICE or the task's speaker_id)", voice))
	}
	def, fastest := e.DefaultWPM, e.MaxWPM
	if def <= 0 {
		def = EspeakDefaultWPM
	}
	if fastest <= 0 {
		fastest = EspeakMaxWPM
	}
	if req.MaxRate >= 1 {
		fastest = min(fastest, int(float64(def)*req.MaxRate))
	}
	dir, err := os.MkdirTemp("", espeakDirPattern)
	if err != nil {
		return nil, fmt.Errorf("espeak-ng: %w", err)
	}
	defer os.RemoveAll(dir)

	wav, d0, err := e.take(ctx, dir, req.Text, voice, def)
	if err != nil {
		return nil, err
	}
	rate, d, takes := def, d0, 1
	target := req.TargetDuration
	// Up to two faster takes: the second corrects for pauses and
	// punctuation, which do not shrink with the rate.
	for takes < 3 && target > 0 && d > target+target/50 && rate < fastest {
		next := int(math.Ceil(float64(rate) * float64(d) / float64(target) * 1.02))
		next = min(max(next, rate+5), fastest)
		w, dn, err := e.take(ctx, dir, req.Text, voice, next)
		if err != nil {
			return nil, err
		}
		wav, d, rate = w, dn, next
		takes++
	}
	return &Audio{WAV: wav, Params: map[string]any{
		"engine":              "espeak-ng",
		"voice":               voice,
		"rate_wpm":            rate,
		"takes":               takes,
		"default_duration_ms": d0.Milliseconds(),
		"duration_ms":         d.Milliseconds(),
		"target_duration_ms":  target.Milliseconds(),
	}}, nil
}

// take speaks text once at wpm and returns the WAV and its duration.
func (e *Espeak) take(ctx context.Context, dir, text, voice string, wpm int) ([]byte, time.Duration, error) {
	cmdName := e.Command
	if cmdName == "" {
		cmdName = "espeak-ng"
	}
	out := filepath.Join(dir, fmt.Sprintf("take-%d.wav", wpm))
	if _, err := run(ctx, []byte(text), cmdName, "-v", voice, "-s", fmt.Sprint(wpm), "-w", out, "--stdin"); err != nil {
		if strings.Contains(err.Error(), "voice does not exist") {
			return nil, 0, fault.Permanent(fmt.Errorf("espeak-ng: voice %q: %w (set TTS_VOICE or the task's speaker_id to a voice of `espeak-ng --voices`, or another TTS_ENGINE)", voice, ErrUnsupportedLanguage))
		}
		return nil, 0, fmt.Errorf("espeak-ng: %w", err)
	}
	wav, err := os.ReadFile(out)
	if err != nil {
		return nil, 0, fmt.Errorf("espeak-ng: read output: %w", err)
	}
	d, err := WAVDuration(wav)
	if err != nil {
		return nil, 0, fmt.Errorf("espeak-ng: output: %w", err)
	}
	return wav, d, nil
}

// espeakVoice picks the voice: an explicit one unless it is "" or
// "default", else the language's ("en" speaks American English).
func espeakVoice(voice, language string) string {
	if voice != "" && voice != "default" {
		return voice
	}
	switch l := baseLanguage(language); l {
	case "":
		return "en-us"
	case "en":
		return "en-us"
	default:
		return l
	}
}

// silentFor answers a request with nothing to say (blank text) with
// silence as long as its slot, so that callers need no special case.
func silentFor(req SynthesisRequest, engine string) *Audio {
	if oneLine(req.Text) != "" {
		return nil
	}
	return &Audio{WAV: silentWAV(req.TargetDuration), Params: map[string]any{
		"engine": engine, "silent": true, "duration_ms": max(req.TargetDuration, 0).Milliseconds(),
	}}
}
