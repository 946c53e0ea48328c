package config

import "testing"

// Two services' engines read under their own prefixes, each with its own
// default, as asr, translate and tts read ASR_*, TRANSLATE_* and TTS_*.
func TestEngineIsReadUnderItsPrefixWithItsDefault(t *testing.T) {
	type cfg struct {
		ASR Engine `env:"ASR_ENGINE" envDefault:"pocketsphinx" envPrefix:"ASR_"`
		TTS Engine `env:"TTS_ENGINE" envDefault:"espeak" envPrefix:"TTS_"`
	}
	cases := []struct {
		name     string
		environ  map[string]string
		asr, tts Engine
	}{
		{"defaults", nil, Engine{Name: "pocketsphinx"}, Engine{Name: "espeak"}},
		{"empty name keeps the default", map[string]string{"ASR_ENGINE": "", "TTS_ENGINE": ""},
			Engine{Name: "pocketsphinx"}, Engine{Name: "espeak"}},
		{"remote", map[string]string{"ASR_ENGINE": "openai", "ASR_BASE_URL": "http://asr", "ASR_API_KEY": "k",
			"ASR_MODEL": "whisper-1", "TTS_BASE_URL": "http://tts", "BASE_URL": "http://unprefixed", "MODEL": "x"},
			Engine{Name: "openai", BaseURL: "http://asr", APIKey: "k", Model: "whisper-1"},
			Engine{Name: "espeak", BaseURL: "http://tts"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got cfg
			if err := Load(c.environ, &got); err != nil {
				t.Fatal(err)
			}
			if got.ASR != c.asr || got.TTS != c.tts {
				t.Errorf("got ASR %+v TTS %+v, want %+v and %+v", got.ASR, got.TTS, c.asr, c.tts)
			}
		})
	}
}

// An embedded EnginePool reads POOL under the service's prefix only, as
// asr, translate and tts read ASR_POOL, TRANSLATE_POOL and TTS_POOL.
func TestEnginePoolIsReadUnderItsPrefix(t *testing.T) {
	t.Parallel()
	var got struct {
		EnginePool `envPrefix:"ASR_"`
	}
	if err := Load(map[string]string{"ASR_POOL": "/etc/asr-pool.json", "POOL": "unprefixed", "TTS_POOL": "other"}, &got); err != nil {
		t.Fatal(err)
	}
	if got.Pool != "/etc/asr-pool.json" {
		t.Errorf("Pool = %q, want ASR_POOL's /etc/asr-pool.json", got.Pool)
	}
}
