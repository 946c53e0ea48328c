package speech_test

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"strings"
	"sync/atomic"
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
	t.Parallel()
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
	t.Parallel()
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

// warmCounter is Pocketsphinx counting the chunks decoded without their
// lead-in (TranscribeAfter); plainEngine hides TranscribeAfter, so every
// lead-in is decoded again, as before chunks were cut in pauses.
type warmCounter struct {
	*speech.Pocketsphinx
	after atomic.Int32
}

func (w *warmCounter) TranscribeAfter(ctx context.Context, path, lang string, skipMS int) ([]speech.Segment, error) {
	w.after.Add(1)
	return w.Pocketsphinx.TranscribeAfter(ctx, path, lang, skipMS)
}

type plainEngine struct{ speech.Transcriber }

// TestChunkedPocketsphinxSkipsLeadIns: chunks cut in pauses are decoded
// without their lead-in, and the transcripts stay those of the lead-ins
// decoded again (the previous output): over the fixtures in chunks of
// several lengths, no more word errors against the references, and no
// fewer words matching the whole file's decode with times within 20 ms.
// (Per chunking the recogniser gains or loses a few words either way:
// two_cities in 10 s chunks 34 errors before, 42 now; jfk in 5 s chunks
// 14 before, 8 now.)
func TestChunkedPocketsphinxSkipsLeadIns(t *testing.T) {
	t.Parallel()
	needTool(t, "pocketsphinx_continuous")
	if testing.Short() {
		t.Skip("decodes the fixtures seven times; skipped with -short")
	}
	warm := &warmCounter{Pocketsphinx: speech.NewPocketsphinx()}
	var prev, got leadInScore
	for _, tc := range []struct {
		name    string
		seconds []int
	}{{"two_cities", []int{10, 15}}, {"jfk", []int{5}}} {
		wav, ref := speechtest.Fixture(t, tc.name+".wav"), speechtest.ReadText(t, tc.name+".txt")
		whole, err := speech.NewPocketsphinx().Transcribe(context.Background(), wav, "en")
		if err != nil {
			t.Fatal(err)
		}
		for _, secs := range tc.seconds {
			p := prev.add(t, plainEngine{speech.NewPocketsphinx()}, wav, ref, secs, whole)
			g := got.add(t, warm, wav, ref, secs, whole)
			t.Logf("%s in %d s chunks: %s; previously %s", tc.name, secs, g, p)
		}
	}
	t.Logf("all: %s; previously %s; %d chunks decoded without their lead-in", got, prev, warm.after.Load())
	if n := warm.after.Load(); n < 4 {
		t.Errorf("%d chunks decoded without their lead-in, want at least 4 (those cut in pauses)", n)
	}
	if got.errors > prev.errors {
		t.Errorf("%d word errors, the previous output %d", got.errors, prev.errors)
	}
	if got.timed < prev.timed {
		t.Errorf("%d words in common with the whole file's decode within 20 ms, the previous output %d", got.timed, prev.timed)
	}
}

// leadInScore sums, over chunked transcripts, the word errors against the
// reference, the words in common with the whole file's decode and those of
// them with times within 20 ms of it.
type leadInScore struct {
	errors, common, timed int
}

func (s *leadInScore) add(t *testing.T, e speech.Transcriber, wav, ref string, secs int, whole []speech.Segment) leadInScore {
	t.Helper()
	segs, err := (&speech.Chunker{Engine: e, ChunkSeconds: secs, Concurrency: 2, LeadSeconds: 5}).Transcribe(context.Background(), wav, "en")
	if err != nil {
		t.Fatal(err)
	}
	var one leadInScore
	one.errors = int(math.Round(speechtest.WER(ref, segsText(segs)) * float64(len(speechtest.Words(ref)))))
	var off int
	one.common, off = commonWords(segs, whole)
	one.timed = one.common - off
	s.errors, s.common, s.timed = s.errors+one.errors, s.common+one.common, s.timed+one.timed
	return one
}

func (s leadInScore) String() string {
	return fmt.Sprintf("%d word errors, %d words as the whole file's (%d within 20 ms)", s.errors, s.common, s.timed)
}

// commonWords aligns the words of a and b (longest common subsequence)
// and returns how many match and how many of them are more than 20 ms
// apart.
func commonWords(a, b []speech.Segment) (int, int) {
	wa, wb := allWords(a), allWords(b)
	lcs := make([][]int, len(wa)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(wb)+1)
	}
	for i := len(wa) - 1; i >= 0; i-- {
		for j := len(wb) - 1; j >= 0; j-- {
			if wa[i].Text == wb[j].Text {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	off := 0
	for i, j := 0, 0; i < len(wa) && j < len(wb); {
		switch {
		case wa[i].Text == wb[j].Text:
			if absMS(wa[i].StartMS-wb[j].StartMS) > 20 || absMS(wa[i].EndMS-wb[j].EndMS) > 20 {
				off++
			}
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			i++
		default:
			j++
		}
	}
	return lcs[0][0], off
}

func allWords(segs []speech.Segment) []speech.Word {
	var ws []speech.Word
	for _, s := range segs {
		ws = append(ws, s.Words...)
	}
	return ws
}

func segsText(segs []speech.Segment) string {
	texts := make([]string, len(segs))
	for i, s := range segs {
		texts[i] = s.Text
	}
	return strings.Join(texts, " ")
}

func TestPocketsphinxSegmentsStayShort(t *testing.T) {
	t.Parallel()
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

func absMS(v int) int { return max(v, -v) }
