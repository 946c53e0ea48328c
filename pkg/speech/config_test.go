package speech_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/speech"
)

func TestConfigPicksEngines(t *testing.T) {
	tr, err := speech.NewTranscriber(speech.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Engine.(*speech.Pocketsphinx); !ok {
		t.Errorf("default ASR engine %T", tr.Engine)
	}
	cfg := speech.Config{
		ASREngine: "openai", ASRBaseURL: "http://whisper:8080",
		TranslateEngine: "openai", TranslateBaseURL: "https://open.bigmodel.cn/api/paas/v4", TranslateAPIKey: "k",
		TranslateBatchSize: 7, TranslateItemMaxRetries: 2, TranslateMaxTextLength: 500,
		TTSEngine: "tts_service", TTSBaseURL: "http://tts:8000", TTSVoice: "speaker_1",
	}
	tr, err = speech.NewTranscriber(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := tr.Engine.(*speech.OpenAITranscriber); !ok || o.Model != "whisper-1" {
		t.Errorf("ASR engine %#v", tr.Engine)
	}
	bt, err := speech.NewTranslator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := bt.Engine.(*speech.ChatTranslator); !ok || c.Model != "glm-4-flash" || bt.BatchSize != 7 || bt.MaxTextLength != 500 {
		t.Errorf("translator %#v engine %#v", bt, bt.Engine)
	}
	syn, err := speech.NewSynthesizer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := syn.(*speech.TTSService); !ok || s.Speaker != "speaker_1" {
		t.Errorf("synthesizer %#v", syn)
	}
}

func TestConfigValidate(t *testing.T) {
	err := speech.Config{ASREngine: "vosk", TranslateEngine: "apy", TTSEngine: "openai", TranslateBatchSize: -1}.Validate()
	if err == nil || !fault.IsPermanent(err) {
		t.Fatalf("want a permanent error, got %v", err)
	}
	for _, want := range []string{"ASR_ENGINE", "TRANSLATE_BASE_URL", "TTS_BASE_URL", "TRANSLATE_BATCH_SIZE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// The embedded engines need no configuration: the zero Config translates
// with apertium, batched.
func ExampleNewTranslator() {
	tr, err := speech.NewTranslator(speech.Config{TranslateBatchSize: 20})
	if err != nil {
		panic(err)
	}
	out, err := tr.Translate(context.Background(), []string{"I have a dog.", "", "The house is big."}, "en", "es")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%q\n", out)
	// Output: ["Tengo un perro." "" "La casa es grande."]
}
