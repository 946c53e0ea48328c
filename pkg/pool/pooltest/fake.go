// Package pooltest holds fake remote engines for the pools' tests: local
// HTTP servers speaking the OpenAI-compatible chat completions protocol
// (as speech.ChatTranslator calls it) that keep their own counters and can
// answer 429 with Retry-After, run out of quota, fail with 5xx or hang.
package pooltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Key is the API key the fakes want.
const Key = "test-key"

// Mode is how a Fake answers.
type Mode int

// Modes of a Fake.
const (
	Serve       Mode = iota // translate ("ES: " + text)
	RateLimited             // 429 with Retry-After: RetryAfter seconds
	ServerError             // 503
	Hang                    // never answer until the client gives up
)

// Fake is one fake engine with its own view of what it served.
type Fake struct {
	Srv *httptest.Server
	// Quota is the characters it serves before it answers 429 "quota
	// exceeded" (0: no quota); Concurrency the calls it serves at once
	// before it answers 429 (0: no limit).
	Quota, Concurrency int
	RetryAfter         int
	// Delay is how long a served call takes.
	Delay time.Duration

	mu                      sync.Mutex
	mode                    Mode
	inFlight, maxInFlight   int
	calls, served           int
	chars                   int
	overQuota, overParallel int
	status                  map[int]int
}

// New starts a fake engine in mode; it stops when the test ends.
func New(t testing.TB, mode Mode) *Fake {
	f := &Fake{mode: mode, RetryAfter: 60, status: map[int]int{}}
	f.Srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Srv.Close)
	return f
}

// URL is the base URL a ChatTranslator is given.
func (f *Fake) URL() string { return f.Srv.URL + "/v1" }

// SetMode changes how the fake answers from now on.
func (f *Fake) SetMode(m Mode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = m
}

// Counters is what a fake saw.
type Counters struct {
	Calls, Served, Chars, MaxInFlight int
	// OverQuota and OverParallel count calls that came when the fake's
	// quota was spent or its concurrency full: a pool that keeps the
	// engine's limits never makes one.
	OverQuota, OverParallel int
	// Status counts the answers by HTTP status.
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
	return Counters{Calls: f.calls, Served: f.served, Chars: f.chars, MaxInFlight: f.maxInFlight,
		OverQuota: f.overQuota, OverParallel: f.overParallel, Status: st}
}

// ResetQuota starts the fake's day again.
func (f *Fake) ResetQuota() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.chars = 0
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	texts, ok := decode(w, r)
	if !ok {
		return
	}
	n := 0
	for _, s := range texts {
		n += utf8.RuneCountInString(s)
	}
	status := f.admit(n)
	defer f.done(status)
	switch status {
	case http.StatusOK:
		time.Sleep(f.Delay)
		answer(w, texts)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfter))
		http.Error(w, `{"error":{"code":"1302","message":"rate limit reached"}}`, status)
	case http.StatusPaymentRequired:
		http.Error(w, `{"error":{"code":"insufficient_quota","message":"You exceeded your current quota"}}`, http.StatusTooManyRequests)
	case 0:
		<-r.Context().Done() // hang until the client gives up
	default:
		http.Error(w, "upstream overloaded", status)
	}
}

// admit counts a call of n characters and says how to answer it (0:
// hang; 402 stands for a 429 naming the quota).
func (f *Fake) admit(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	switch {
	case f.mode == RateLimited:
		return http.StatusTooManyRequests
	case f.mode == ServerError:
		return http.StatusServiceUnavailable
	case f.mode == Hang:
		return 0
	case f.Concurrency > 0 && f.inFlight > f.Concurrency:
		f.overParallel++
		return http.StatusTooManyRequests
	case f.Quota > 0 && f.chars+n > f.Quota:
		f.overQuota++
		return http.StatusPaymentRequired
	}
	f.chars += n
	f.served++
	return http.StatusOK
}

func (f *Fake) done(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inFlight--
	f.status[status]++
}

// decode reads a chat completions request and the texts its prompt holds.
func decode(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+Key {
		http.Error(w, "bad path or key", http.StatusNotFound)
		return nil, false
	}
	var req struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return nil, false
	}
	prompt := req.Messages[len(req.Messages)-1].Content
	var texts []string
	if err := json.Unmarshal([]byte(prompt[strings.LastIndex(prompt, "\n\n[")+2:]), &texts); err != nil {
		http.Error(w, "no array in prompt", http.StatusBadRequest)
		return nil, false
	}
	return texts, true
}

// answer writes the chat completion with every text prefixed "ES: ".
func answer(w http.ResponseWriter, texts []string) {
	out := make([]string, len(texts))
	for i, s := range texts {
		out[i] = "ES: " + s
	}
	arr, _ := json.Marshal(out)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]string{"role": "assistant", "content": string(arr)}}},
	})
}
