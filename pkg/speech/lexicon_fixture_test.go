package speech_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
)

// TestLexiconDecodesTheSame transcribes the 11 s fixture with the dictionary
// trimmed to the language model's words (the default) and with the whole
// one: the same segments, words, times and confidences. (two_cities.wav
// too, by hand: the decoder's output byte for byte; 10 CPU-s more a run.)
func TestLexiconDecodesTheSame(t *testing.T) {
	t.Parallel()
	needTool(t, "pocketsphinx_continuous")
	ctx := context.Background()
	for _, name := range []string{"jfk.wav"} {
		wav := speechtest.Fixture(t, name)
		trimmed, err := speech.NewPocketsphinx().Transcribe(ctx, wav, "en")
		if err != nil {
			t.Fatal(err)
		}
		whole, err := (&speech.Pocketsphinx{FullLexicon: true}).Transcribe(ctx, wav, "en")
		if err != nil {
			t.Fatal(err)
		}
		if len(whole) == 0 || !reflect.DeepEqual(trimmed, whole) {
			t.Errorf("%s: with the trimmed dictionary\n%+v\nwith the whole one\n%+v", name, trimmed, whole)
		}
	}
}
