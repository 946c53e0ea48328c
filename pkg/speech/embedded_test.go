package speech_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// needTool fails the test when a speech tool is missing: the embedded
// engines are the default, so their tests must not silently skip.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s not installed (Debian packages pocketsphinx pocketsphinx-en-us apertium apertium-eng-spa espeak-ng): %v", name, err)
	}
}

func TestPocketsphinxConformance(t *testing.T) {
	needTool(t, "pocketsphinx_continuous")
	speechtest.TranscriberSuite{
		Engine:      speech.NewPocketsphinx(),
		Speech:      speechtest.Fixture(t, "jfk.wav"),
		Reference:   speechtest.ReadText(t, "jfk.txt"),
		Language:    "en",
		MaxWER:      0.7,
		Unsupported: "es",
	}.Run(t)
}

func TestChunkedPocketsphinxConformance(t *testing.T) {
	needTool(t, "pocketsphinx_continuous")
	if testing.Short() {
		t.Skip("44 s of speech; skipped with -short")
	}
	// two_cities is 44 s: 10 s chunks make five pieces cut at silences.
	speechtest.TranscriberSuite{
		Engine:    &speech.Chunker{Engine: speech.NewPocketsphinx(), ChunkSeconds: 10, Concurrency: 2},
		Speech:    speechtest.Fixture(t, "two_cities.wav"),
		Reference: speechtest.ReadText(t, "two_cities.txt"),
		Language:  "en-US",
		// 0.269 measured with DefaultPocketsphinxSearch (0.294 with the
		// package's own search); each chunk restarts the decoder and its
		// normalisation.
		MaxWER:      0.35,
		Unsupported: "fr",
	}.Run(t)
}

func TestPocketsphinxSegmentsStayShort(t *testing.T) {
	needTool(t, "pocketsphinx_continuous")
	p := &speech.Pocketsphinx{MaxSegment: 2 * time.Second}
	segs, err := p.Transcribe(context.Background(), speechtest.Fixture(t, "jfk.wav"), "en")
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range segs {
		if s.EndMS-s.StartMS > 2000 && len(s.Words) > 1 {
			t.Errorf("segment %d is %d ms with %d words, want ≤ 2000 ms", i, s.EndMS-s.StartMS, len(s.Words))
		}
	}
	if len(segs) < 5 {
		t.Errorf("%d segments: long utterances were not split", len(segs))
	}
}

func TestApertiumConformance(t *testing.T) {
	needTool(t, "apertium")
	speechtest.TranslatorSuite{
		Engine: speech.NewApertium(), From: "en", To: "es",
		Unsupported: [2]string{"en", "xx"},
	}.Run(t)
	t.Run("spa-eng", func(t *testing.T) {
		got, err := speech.NewApertium().Translate(context.Background(), []string{"Hola mundo.", "Tengo un perro."}, "es", "en")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !strings.Contains(strings.ToLower(got[1]), "dog") {
			t.Errorf("got %q", got)
		}
	})
	t.Run("batch equals single lines", func(t *testing.T) {
		in := []string{"The red", "house is big", "I have a dog", "Mr. Smith went to Washington. He said hi"}
		a := speech.NewApertium()
		batch, err := a.Translate(context.Background(), in, "en", "es")
		if err != nil {
			t.Fatal(err)
		}
		for i, text := range in {
			one, err := a.Translate(context.Background(), []string{text}, "en", "es")
			if err != nil {
				t.Fatal(err)
			}
			if one[0] != batch[i] {
				t.Errorf("line %d: batch %q, alone %q", i, batch[i], one[0])
			}
		}
	})
}

func TestEspeakConformance(t *testing.T) {
	needTool(t, "espeak-ng")
	speechtest.SynthesizerSuite{Engine: speech.NewEspeak(), Language: "es", Unsupported: "xx"}.Run(t)
}

func TestEspeakFitsTarget(t *testing.T) {
	needTool(t, "espeak-ng")
	e := speech.NewEspeak()
	text := "Y así, mis compatriotas: no pregunten qué puede hacer su país por ustedes, pregunten qué pueden hacer ustedes por su país."
	ctx := context.Background()
	free, err := e.Synthesize(ctx, speech.SynthesisRequest{Text: text, Language: "es"})
	if err != nil {
		t.Fatal(err)
	}
	d0 := speechtest.CheckAudio(t, free)
	target := d0 * 2 / 3
	fit, err := e.Synthesize(ctx, speech.SynthesisRequest{Text: text, Language: "es", TargetDuration: target})
	if err != nil {
		t.Fatal(err)
	}
	d1 := speechtest.CheckAudio(t, fit)
	t.Logf("default %v, target %v, fitted %v, params %v", d0, target, d1, fit.Params)
	if d1 >= d0 || absDur(d1-target) > target/10 {
		t.Errorf("fitted %v, want within 10%% of %v (default rate %v)", d1, target, d0)
	}
	if rate, _ := fit.Params["rate_wpm"].(int); rate <= speech.EspeakDefaultWPM || rate > speech.EspeakMaxWPM {
		t.Errorf("rate_wpm %v outside (%d, %d]", fit.Params["rate_wpm"], speech.EspeakDefaultWPM, speech.EspeakMaxWPM)
	}
	// A slot longer than the line: no slowing down.
	long, err := e.Synthesize(ctx, speech.SynthesisRequest{Text: text, Language: "es", TargetDuration: 2 * d0})
	if err != nil {
		t.Fatal(err)
	}
	if rate := long.Params["rate_wpm"]; rate != speech.EspeakDefaultWPM {
		t.Errorf("long slot: rate %v, want the default %d", rate, speech.EspeakDefaultWPM)
	}
	// Impossible target: bounded by the fastest rate.
	tiny, err := e.Synthesize(ctx, speech.SynthesisRequest{Text: text, Language: "es", TargetDuration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if rate := tiny.Params["rate_wpm"]; rate != speech.EspeakMaxWPM {
		t.Errorf("tiny slot: rate %v, want the bound %d", rate, speech.EspeakMaxWPM)
	}
}

func TestEspeakRejectsOptionVoice(t *testing.T) {
	_, err := speech.NewEspeak().Synthesize(context.Background(), speech.SynthesisRequest{Text: "hola", Voice: "--stdout"})
	if err == nil {
		t.Fatal("voice --stdout accepted")
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
