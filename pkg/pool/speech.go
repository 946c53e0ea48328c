package pool

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/speech"
)

// Kinds are the engine kinds of each step's pool.
var Kinds = map[string][]string{
	"asr":       {speech.EnginePocketsphinx, speech.EngineOpenAI},
	"translate": {speech.EngineApertium, speech.EngineOpenAI, speech.EngineAPy},
	"tts":       {speech.EngineEspeak, speech.EngineTTSService, speech.EngineOpenAI},
}

// Transcriber is a pool of recognisers: a speech.Transcriber whose
// calls (one per chunk) go to the pool's engines, counted in audio seconds.
type Transcriber struct {
	Pool    *Pool
	Engines map[string]speech.Transcriber
}

// Transcribe implements speech.Transcriber.
func (t *Transcriber) Transcribe(ctx context.Context, wavPath, language string) ([]speech.Segment, error) {
	units, err := audioSeconds(wavPath)
	if err != nil {
		return nil, err
	}
	var segs []speech.Segment
	err = t.Pool.Do(ctx, units, func(ctx context.Context, engine string) error {
		var err error
		segs, err = t.Engines[engine].Transcribe(ctx, wavPath, language)
		return err
	})
	return segs, err
}

// Capabilities implements speech.Capable: what any member can do.
func (t *Transcriber) Capabilities(ctx context.Context) ([]string, error) {
	return union(ctx, t.Engines)
}

// audioSeconds is the length of a WAV file in whole seconds, rounded up.
func audioSeconds(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("asr pool: %w", err)
	}
	d, err := speech.WAVDuration(b)
	if err != nil {
		return 0, fmt.Errorf("asr pool: %s: %w", path, err)
	}
	return int64(math.Ceil(d.Seconds())), nil
}

// Translator is a pool of translators, counted in characters.
type Translator struct {
	Pool    *Pool
	Engines map[string]speech.Translator
}

// Translate implements speech.Translator.
func (t *Translator) Translate(ctx context.Context, texts []string, from, to string) ([]string, error) {
	units := int64(0)
	for _, s := range texts {
		units += int64(utf8.RuneCountInString(s))
	}
	var out []string
	err := t.Pool.Do(ctx, units, func(ctx context.Context, engine string) error {
		var err error
		out, err = t.Engines[engine].Translate(ctx, texts, from, to)
		return err
	})
	return out, err
}

// Capabilities implements speech.Capable: what any member can do.
func (t *Translator) Capabilities(ctx context.Context) ([]string, error) {
	return union(ctx, t.Engines)
}

// Synthesizer is a pool of synthesizers, counted in characters.
type Synthesizer struct {
	Pool    *Pool
	Engines map[string]speech.Synthesizer
}

// Synthesize implements speech.Synthesizer.
func (s *Synthesizer) Synthesize(ctx context.Context, req speech.SynthesisRequest) (*speech.Audio, error) {
	var out *speech.Audio
	err := s.Pool.Do(ctx, int64(utf8.RuneCountInString(req.Text)), func(ctx context.Context, engine string) error {
		var err error
		out, err = s.Engines[engine].Synthesize(ctx, req)
		return err
	})
	return out, err
}

// Capabilities implements speech.Capable: what any member can do.
func (s *Synthesizer) Capabilities(ctx context.Context) ([]string, error) {
	return union(ctx, s.Engines)
}

// Voices implements speech.Voiced: the voices of any member.
func (s *Synthesizer) Voices(ctx context.Context) ([]string, error) {
	return unionOf(ctx, s.Engines, speech.Voices)
}

// union is every capability of the engines, sorted; "*" alone when one
// serves any language.
func union[E any](ctx context.Context, engines map[string]E) ([]string, error) {
	return unionOf(ctx, engines, speech.Capabilities)
}

// unionOf is every value of of(engine) of the engines, sorted; "*" alone
// when one says any.
func unionOf[E any](ctx context.Context, engines map[string]E, of func(context.Context, any) ([]string, error)) ([]string, error) {
	set := map[string]bool{}
	for _, e := range engines {
		caps, err := of(ctx, e)
		if err != nil {
			return nil, err
		}
		for _, c := range caps {
			if c == speech.AnyLanguage {
				return []string{speech.AnyLanguage}, nil
			}
			set[c] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, nil
}

// engines builds an engine of each member of the pool with build, from
// base with the member's request timeout.
func engines[E any](p *Pool, step string, base speech.Config, build func(c speech.Config, m Member) (E, error)) (map[string]E, error) {
	out := map[string]E{}
	for _, m := range p.Sched.Cfg.Engines {
		c := base
		if m.TimeoutSeconds > 0 {
			c.HTTPTimeout = time.Duration(m.TimeoutSeconds) * time.Second
		}
		e, err := build(c, m)
		if err != nil {
			return nil, fmt.Errorf("%s pool engine %s: %w", step, m.Name, err)
		}
		out[m.Name] = e
	}
	return out, nil
}

// NewTranscriber builds the pool's recognisers from the step's shared
// settings base (the member's kind, URL, key and model replace base's).
func NewTranscriber(p *Pool, base speech.Config) (*Transcriber, error) {
	e, err := engines(p, "asr", base, func(c speech.Config, m Member) (speech.Transcriber, error) {
		c.ASREngine, c.ASRBaseURL, c.ASRAPIKey, c.ASRModel = m.Kind, m.BaseURL, m.APIKey, m.Model
		ch, err := speech.NewTranscriber(c)
		if err != nil {
			return nil, err
		}
		return ch.Engine, nil
	})
	return &Transcriber{Pool: p, Engines: e}, err
}

// NewTranslator builds the pool's translators from base.
func NewTranslator(p *Pool, base speech.Config) (*Translator, error) {
	e, err := engines(p, "translate", base, func(c speech.Config, m Member) (speech.Translator, error) {
		c.TranslateEngine, c.TranslateBaseURL, c.TranslateAPIKey, c.TranslateModel = m.Kind, m.BaseURL, m.APIKey, m.Model
		b, err := speech.NewTranslator(c)
		if err != nil {
			return nil, err
		}
		return b.Engine, nil
	})
	return &Translator{Pool: p, Engines: e}, err
}

// NewSynthesizer builds the pool's synthesizers from base.
func NewSynthesizer(p *Pool, base speech.Config) (*Synthesizer, error) {
	e, err := engines(p, "tts", base, func(c speech.Config, m Member) (speech.Synthesizer, error) {
		c.TTSEngine, c.TTSBaseURL, c.TTSAPIKey, c.TTSModel = m.Kind, m.BaseURL, m.APIKey, m.Model
		return speech.NewSynthesizer(c)
	})
	return &Synthesizer{Pool: p, Engines: e}, err
}
