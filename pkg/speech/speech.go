package speech

import (
	"context"
	"errors"
	"time"
)

// Segment is one stretch of recognised speech, with times in milliseconds
// from the start of the audio.
type Segment struct {
	StartMS, EndMS int
	Text           string
	Words          []Word
}

// Word is one recognised word with its timing and the engine's confidence
// (0..1; 0 when the engine gives none).
type Word struct {
	StartMS, EndMS int
	Text           string
	Confidence     float64
}

// Transcriber turns a 16 kHz mono 16-bit WAV file into timed segments.
// Audio without speech yields zero segments and no error.
type Transcriber interface {
	Transcribe(ctx context.Context, wavPath, language string) ([]Segment, error)
}

// Translator translates texts from one language to another, returning
// exactly one translation per input, in order.
type Translator interface {
	Translate(ctx context.Context, texts []string, from, to string) ([]string, error)
}

// Synthesizer speaks one line of text.
type Synthesizer interface {
	Synthesize(ctx context.Context, req SynthesisRequest) (*Audio, error)
}

// SynthesisRequest is one line to speak. TargetDuration, when positive, is
// the length of the slot the line should fit; engines that can choose a
// speaking rate aim for it, but never faster than MaxRate times their
// default rate when MaxRate is 1 or more (the rest is left to the timing
// step, which stretches and borrows silence).
type SynthesisRequest struct {
	Text, Language, Voice string
	TargetDuration        time.Duration
	MaxRate               float64
}

// Audio is the synthesized speech of one segment: a complete WAV file and
// the parameters used to make it (recorded in segments.tts_params_json).
type Audio struct {
	WAV    []byte
	Params map[string]any
}

// ErrUnsupportedLanguage is wrapped (and marked permanent) by engines asked
// for a language or language pair they cannot handle.
var ErrUnsupportedLanguage = errors.New("unsupported language")

// ErrCountMismatch is wrapped by translators whose engine returned a
// different number of translations than texts sent.
var ErrCountMismatch = errors.New("translation count mismatch")
