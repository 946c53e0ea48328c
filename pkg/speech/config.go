package speech

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

// Engine names accepted in Config.
const (
	EnginePocketsphinx = "pocketsphinx"
	EngineOpenAI       = "openai"
	EngineApertium     = "apertium"
	EngineAPy          = "apy"
	EngineEspeak       = "espeak"
	EngineTTSService   = "tts_service"
)

// Config picks and configures the engines. Each field is named after the
// environment variable a service maps onto it; empty engine names mean the
// embedded defaults.
type Config struct {
	ASREngine  string // ASR_ENGINE: pocketsphinx (default) | openai
	ASRBaseURL string // ASR_BASE_URL
	ASRAPIKey  string // ASR_API_KEY
	ASRModel   string // ASR_MODEL (openai: default whisper-1)
	// ASRChunkSeconds and ASRConcurrency configure the Chunker around the
	// recogniser (defaults 60 and 2).
	ASRChunkSeconds, ASRConcurrency int
	// ASRChunkNice is the Chunker's Nice (0: the priority is left alone).
	ASRChunkNice int
	// PocketsphinxSearch is the embedded recogniser's search options
	// (POCKETSPHINX_SEARCH; see DefaultPocketsphinxSearch).
	PocketsphinxSearch string
	// ASRStall and OnASRStall are the embedded recogniser's Stall and
	// OnStall (a decoder loaded in process that stops making progress).
	ASRStall   time.Duration
	OnASRStall func(err error)

	TranslateEngine  string // TRANSLATE_ENGINE: apertium (default) | openai | apy
	TranslateBaseURL string // TRANSLATE_BASE_URL
	TranslateAPIKey  string // TRANSLATE_API_KEY
	TranslateModel   string // TRANSLATE_MODEL (openai: default glm-4-flash)
	// TranslateBatchSize, TranslateItemMaxRetries, TranslateMaxTextLength
	// configure the Batcher (TRANSLATE_BATCH_SIZE, TRANSLATE_ITEM_MAX_RETRIES,
	// TRANSLATE_MAX_TEXT_LENGTH; defaults 20, 3, no limit).
	TranslateBatchSize, TranslateItemMaxRetries, TranslateMaxTextLength int

	TTSEngine  string // TTS_ENGINE: espeak (default) | tts_service | openai
	TTSBaseURL string // TTS_BASE_URL
	TTSAPIKey  string // TTS_API_KEY
	TTSModel   string // TTS_MODEL (openai: default tts-1)
	TTSVoice   string // TTS_VOICE: the voice or speaker when a task names none

	// HTTPTimeout bounds one request of a remote engine;
	// DefaultHTTPTimeout when zero.
	HTTPTimeout time.Duration
}

// Validate reports every setting that is unknown or missing.
func (c Config) Validate() error {
	var errs []error
	check := func(setting, name string, known []string, baseURL, urlSetting string, embedded string) {
		if name == "" {
			name = embedded
		}
		for _, k := range known {
			if k == name {
				if name != embedded && baseURL == "" {
					errs = append(errs, fmt.Errorf("%s=%s needs %s", setting, name, urlSetting))
				}
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s=%q: want one of %v", setting, name, known))
	}
	check("ASR_ENGINE", c.ASREngine, []string{EnginePocketsphinx, EngineOpenAI}, c.ASRBaseURL, "ASR_BASE_URL", EnginePocketsphinx)
	check("TRANSLATE_ENGINE", c.TranslateEngine, []string{EngineApertium, EngineOpenAI, EngineAPy}, c.TranslateBaseURL, "TRANSLATE_BASE_URL", EngineApertium)
	check("TTS_ENGINE", c.TTSEngine, []string{EngineEspeak, EngineTTSService, EngineOpenAI}, c.TTSBaseURL, "TTS_BASE_URL", EngineEspeak)
	for _, n := range []struct {
		name string
		v    int
	}{{"ASR_CHUNK_SECONDS", c.ASRChunkSeconds}, {"ASR_CONCURRENCY", c.ASRConcurrency},
		{"TRANSLATE_BATCH_SIZE", c.TranslateBatchSize}, {"TRANSLATE_ITEM_MAX_RETRIES", c.TranslateItemMaxRetries},
		{"TRANSLATE_MAX_TEXT_LENGTH", c.TranslateMaxTextLength}} {
		if n.v < 0 {
			errs = append(errs, fmt.Errorf("%s=%d: must not be negative", n.name, n.v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fault.Permanent(fmt.Errorf("speech config: %w", err))
	}
	return nil
}

func (c Config) client() *http.Client {
	d := c.HTTPTimeout
	if d <= 0 {
		d = DefaultHTTPTimeout
	}
	return &http.Client{Timeout: d}
}

// remote is the server at base with key, reached through c's client.
func (c Config) remote(base, key string) Remote {
	return Remote{BaseURL: base, APIKey: key, Client: c.client()}
}

// NewTranscriber returns the configured recogniser inside a Chunker.
func NewTranscriber(c Config) (*Chunker, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var engine Transcriber
	switch c.ASREngine {
	case EngineOpenAI:
		engine = &OpenAITranscriber{Remote: c.remote(c.ASRBaseURL, c.ASRAPIKey), Model: firstNonEmpty(c.ASRModel, "whisper-1")}
	default:
		engine = &Pocketsphinx{Search: c.PocketsphinxSearch, Stall: c.ASRStall, OnStall: c.OnASRStall}
	}
	return &Chunker{Engine: engine, ChunkSeconds: c.ASRChunkSeconds, Concurrency: c.ASRConcurrency, Nice: c.ASRChunkNice}, nil
}

// NewTranslator returns the configured translator inside a Batcher.
func NewTranslator(c Config) (*Batcher, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var engine Translator
	switch c.TranslateEngine {
	case EngineOpenAI:
		engine = &ChatTranslator{Remote: c.remote(c.TranslateBaseURL, c.TranslateAPIKey), Model: firstNonEmpty(c.TranslateModel, "glm-4-flash")}
	case EngineAPy:
		engine = &APy{BaseURL: c.TranslateBaseURL, Client: c.client()}
	default:
		engine = NewApertium()
	}
	return &Batcher{Engine: engine, BatchSize: c.TranslateBatchSize, ItemMaxRetries: c.TranslateItemMaxRetries, MaxTextLength: c.TranslateMaxTextLength}, nil
}

// NewSynthesizer returns the configured synthesizer: an *Espeak,
// *TTSService or *OpenAISynthesizer.
func NewSynthesizer(c Config) (Synthesizer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	switch c.TTSEngine {
	case EngineTTSService:
		return &TTSService{Remote: c.remote(c.TTSBaseURL, c.TTSAPIKey), Speaker: c.TTSVoice}, nil
	case EngineOpenAI:
		return &OpenAISynthesizer{Remote: c.remote(c.TTSBaseURL, c.TTSAPIKey), Model: firstNonEmpty(c.TTSModel, "tts-1"), Voice: c.TTSVoice}, nil
	default:
		return &Espeak{Voice: c.TTSVoice}, nil
	}
}
