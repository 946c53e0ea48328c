// Package pooltest holds fake remote engines for the pools' tests: local
// HTTP servers speaking the real protocols (OpenAI-compatible chat
// completions, transcriptions and speech, and tts_service's /synthesize) that
// keep their own counters and can answer 429 with Retry-After, run out of
// quota, fail with 5xx or hang.
package pooltest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Key is the API key the fakes want.
const Key = "test-key"

// Mode is how a Fake answers.
type Mode int

// Modes of a Fake.
const (
	Serve       Mode = iota // serve the call (see the protocols in proto.go)
	RateLimited             // 429 with Retry-After: RetryAfter seconds
	ServerError             // 503
	Hang                    // never answer until the client gives up
)

// Fake is one fake engine with its own view of what it served. It counts
// in its protocol's unit: characters for chat completions and speech, audio
// seconds (rounded up) for transcriptions, as the pools do.
type Fake struct {
	Srv *httptest.Server
	// Quota is the units it serves before it answers 429 "quota
	// exceeded" (0: no quota); Concurrency the calls it serves at once
	// before it answers 429 (0: no limit).
	Quota, Concurrency int
	RetryAfter         int
	// Delay is how long a served call takes.
	Delay time.Duration
	// Flaky, when above zero, answers every Flaky-th call in FlakyMode
	// (an engine that is rate limited or failing now and then).
	Flaky     int
	FlakyMode Mode

	mu                      sync.Mutex
	mode                    Mode
	inFlight, maxInFlight   int
	calls, served           int
	units, unitsServed      int
	overQuota, overParallel int
	status                  map[int]int
	// quit ends the calls that hang when the test ends.
	quit chan struct{}
}

// New starts a fake engine in mode; it stops when the test ends.
func New(t testing.TB, mode Mode) *Fake {
	f := &Fake{mode: mode, RetryAfter: 60, status: map[int]int{}, quit: make(chan struct{})}
	f.Srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.quit)
		f.Srv.Close()
	})
	return f
}

// URL is the base URL a ChatTranslator is given (with /v1).
func (f *Fake) URL() string { return f.Srv.URL + "/v1" }

// Root is the base URL of the transcription and speech clients (without
// /v1) and of a tts_service.
func (f *Fake) Root() string { return f.Srv.URL }

// SetMode changes how the fake answers from now on.
func (f *Fake) SetMode(m Mode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = m
}

// Counters is what a fake saw.
type Counters struct {
	Calls, Served, MaxInFlight int
	// Units are the units served in the fake's current day (since
	// ResetQuota), UnitsServed in all.
	Units, UnitsServed int
	// OverQuota and OverParallel count calls that came when the fake's
	// quota was spent or its concurrency full: a pool that keeps the
	// engine's limits never makes one.
	OverQuota, OverParallel int
	// Status counts the answers by HTTP status (0: hung up on).
	Status map[int]int
}

// Counters returns a copy of the fake's counters.
func (f *Fake) Counters() Counters {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := map[int]int{}
	for k, v := range f.status {
		st[k] = v
	}
	return Counters{Calls: f.calls, Served: f.served, Units: f.units, UnitsServed: f.unitsServed,
		MaxInFlight: f.maxInFlight, OverQuota: f.overQuota, OverParallel: f.overParallel, Status: st}
}

// ResetQuota starts the fake's day again.
func (f *Fake) ResetQuota() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.units = 0
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	c, ok := decode(w, r)
	if !ok {
		return
	}
	status := f.admit(c.units)
	switch status {
	case http.StatusOK:
		wait(r, f.Delay)
	case 0:
		f.hang(r)
	}
	// Counted out before the answer is written: the client may start its
	// next call as soon as it has read the answer.
	f.done(status)
	switch status {
	case http.StatusOK:
		c.reply(w)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfter))
		http.Error(w, `{"error":{"code":"1302","message":"rate limit reached"}}`, status)
	case http.StatusPaymentRequired:
		http.Error(w, `{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}`, http.StatusTooManyRequests)
	case 0:
	default:
		http.Error(w, "upstream overloaded", status)
	}
}

// hang answers nothing until the client gives up (or the test ends). The
// body is read to its end first: only then does the server watch the
// connection and end the request's context when the client closes it.
func (f *Fake) hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-f.quit:
	}
}

// wait waits d or until the client gives up.
func wait(r *http.Request, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// admit counts a call of n units and says how to answer it (0: hang; 402
// stands for a 429 naming the quota).
func (f *Fake) admit(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	mode := f.mode
	if f.Flaky > 0 && f.calls%f.Flaky == 0 {
		mode = f.FlakyMode
	}
	switch {
	case mode == RateLimited:
		return http.StatusTooManyRequests
	case mode == ServerError:
		return http.StatusServiceUnavailable
	case mode == Hang:
		return 0
	case f.Concurrency > 0 && f.inFlight > f.Concurrency:
		f.overParallel++
		return http.StatusTooManyRequests
	case f.Quota > 0 && f.units+n > f.Quota:
		f.overQuota++
		return http.StatusPaymentRequired
	}
	f.units += n
	f.unitsServed += n
	f.served++
	return http.StatusOK
}

func (f *Fake) done(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	f.status[status]++
}
