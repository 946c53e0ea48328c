package speech_test

import (
	"context"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
)

// TestEspeakMaxRate asks for a long line in a short slot: without MaxRate
// espeak-ng speeds up as far as it can, with MaxRate 1.3 it stops at 1.3
// times its default rate and leaves the rest to the timing step.
func TestEspeakMaxRate(t *testing.T) {
	req := speech.SynthesisRequest{Text: "Esta frase es bastante larga para un hueco tan corto como este.", Language: "es",
		TargetDuration: 1500 * time.Millisecond}
	rate := func(req speech.SynthesisRequest) int {
		a, err := speech.NewEspeak().Synthesize(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return a.Params["rate_wpm"].(int)
	}
	free := rate(req)
	req.MaxRate = 1.3
	bounded := rate(req)
	if limit := speech.EspeakDefaultWPM * 13 / 10; bounded > limit || bounded <= speech.EspeakDefaultWPM || free <= limit {
		t.Errorf("rate %d wpm without a bound, %d wpm with MaxRate 1.3: want the first above %d, the second in (%d, %d]",
			free, bounded, limit, speech.EspeakDefaultWPM, limit)
	}
}
