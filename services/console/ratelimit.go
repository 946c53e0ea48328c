package main

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimitedClients bounds the addresses the login limiter remembers; past
// it, addresses whose bucket has refilled are forgotten.
const maxLimitedClients = 10000

// loginLimiter bounds the login attempts of each client address (a token
// bucket per address): a guessed token costs an attacker time. Each
// replica counts on its own, so N replicas allow N times the rate.
type loginLimiter struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

func newLoginLimiter(perMinute, burst int) *loginLimiter {
	return &loginLimiter{every: time.Minute / time.Duration(max(perMinute, 1)), burst: max(burst, 1),
		now: time.Now, clients: map[string]*rate.Limiter{}}
}

// allow takes one attempt from addr's bucket; when it is empty it answers
// how long until the next attempt is allowed.
func (l *loginLimiter) allow(addr string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.clients[addr]
	if !ok {
		if len(l.clients) >= maxLimitedClients {
			l.forgetIdle(now)
		}
		lim = rate.NewLimiter(rate.Every(l.every), l.burst)
		l.clients[addr] = lim
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// forgetIdle drops the addresses whose bucket is full again: forgetting
// them changes nothing.
func (l *loginLimiter) forgetIdle(now time.Time) {
	for addr, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, addr)
		}
	}
}

// clientAddr is the address a request came from (the peer; a proxy in
// front of the console is one client unless it is bypassed).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tooManyLogins answers 429 with Retry-After in whole seconds.
func tooManyLogins(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	writeJSON(w, http.StatusTooManyRequests, &apiError{Code: "rate_limited",
		Message: "too many login attempts from this address; retry after " + strconv.Itoa(max(secs, 1)) + " s"})
}
