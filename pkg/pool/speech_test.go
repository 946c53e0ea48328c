package pool_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
	"github.com/dubflow/dubflow/pkg/pool/pooltest"
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/speech/speechtest"
	"github.com/dubflow/dubflow/pkg/testenv"
)

// rootMember is a member whose client takes the server root (transcription,
// speech, tts_service).
func rootMember(name, kind string, f *pooltest.Fake) pool.Member {
	return pool.Member{Name: name, Kind: kind, BaseURL: f.Root(), APIKey: pooltest.Key,
		Limits: pool.Limits{Concurrency: f.Concurrency, DailyQuota: int64(f.Quota)}}
}

// TestTranscriberPool: the asr pool over the OpenAI-compatible
// transcription protocol counts audio seconds: a 429 moves the chunk to the
// next engine, whose quota (in seconds, as the fake counts them) is kept;
// once both are out the chunk waits.
func TestTranscriberPool(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	clk := &clock{}
	limited, ok := pooltest.New(t, pooltest.RateLimited), pooltest.New(t, pooltest.Serve)
	limited.RetryAfter = 90
	ok.Quota = 10 // seconds: three chunks of 2.5 s (3 s each, rounded up)
	ml := rootMember("limited", speech.EngineOpenAI, limited)
	ml.Weight = 10
	p := stepPool(t, db.Pool, clk, "asr", ml, rootMember("ok", speech.EngineOpenAI, ok))
	tr, err := pool.NewTranscriber(p, speech.Config{HTTPTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wav := filepath.Join(t.TempDir(), "chunk.wav")
	if err := os.WriteFile(wav, speechtest.WAV(2500*time.Millisecond, false), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		segs, err := tr.Transcribe(context.Background(), wav, "en")
		if err != nil || len(segs) != 1 || segs[0].Text != pooltest.Transcript || segs[0].EndMS > 2500 {
			t.Fatalf("chunk %d: %+v, %v; want the fake's one segment within the chunk", i, segs, err)
		}
	}
	_, err = tr.Transcribe(context.Background(), wav, "en")
	if reason, until, waiting := fault.WaitOf(err); !waiting || reason != fault.WaitRateLimit || until.Sub(clk.Now()) < 80*time.Second {
		t.Fatalf("both engines out: %v (%s until %s), want a rate_limit wait for the 429's Retry-After", err, reason, until)
	}
	if c := limited.Counters(); c.Calls != 1 {
		t.Errorf("rate-limited engine called %d times, want once (then cooled down)", c.Calls)
	}
	if c := ok.Counters(); c.Served != 3 || c.Units != 9 || c.OverQuota != 0 {
		t.Errorf("engine with quota saw %+v; want 3 chunks, 9 seconds, none over its quota", c)
	}
	if s := status(t, p, "ok"); s.Used != 9 || s.Left != 1 {
		t.Errorf("schedule row %+v: want 9 seconds used, 1 left", s)
	}
}

// TestSynthesizerPool: the tts pool over the OpenAI speech protocol and
// tts_service: an engine answering 503 opens its breaker and the lines go
// to the other; two replicas of 8 callers never pass the engine's
// concurrency; characters are counted.
func TestSynthesizerPool(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	clk := &clock{}
	bad, svc := pooltest.New(t, pooltest.ServerError), pooltest.New(t, pooltest.Serve)
	svc.Concurrency, svc.Delay = 2, 10*time.Millisecond
	mb := rootMember("openai", speech.EngineOpenAI, bad)
	mb.Weight, mb.Concurrency = 100, 1
	members := []pool.Member{mb, rootMember("svc", speech.EngineTTSService, svc)}
	var synths []*pool.Synthesizer
	for range 2 {
		p := stepPool(t, db.Pool, clk, "tts", members...)
		p.LocalWait = time.Second
		s, err := pool.NewSynthesizer(p, speech.Config{HTTPTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		synths = append(synths, s)
	}
	const lines, text = 16, "hola mundo" // 10 characters, 600 ms of the fake's speech
	concurrently(t, lines, func(i int) error {
		a, err := synths[i%2].Synthesize(context.Background(), speech.SynthesisRequest{Text: text, Language: "es"})
		if err == nil {
			if d, derr := speech.WAVDuration(a.WAV); derr != nil || d != 600*time.Millisecond {
				err = fmt.Errorf("audio of %s (%v), want 600ms", d, derr)
			}
		}
		return err
	})
	if c := bad.Counters(); c.Calls != pool.BreakerFailures {
		t.Errorf("failing engine called %d times, want %d (then its breaker is open)", c.Calls, pool.BreakerFailures)
	}
	if c := svc.Counters(); c.Served != lines || c.UnitsServed != lines*len(text) || c.OverParallel != 0 || c.MaxInFlight > 2 {
		t.Errorf("tts_service saw %+v: want %d lines of %d characters, never more than 2 at once", c, lines, len(text))
	}
	if s := status(t, synths[0].Pool, "openai"); s.Breaker != "open" {
		t.Errorf("failing engine's breaker %s, want open", s.Breaker)
	}
}
