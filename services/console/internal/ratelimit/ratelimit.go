// Package ratelimit bounds the login attempts of each client address: a
// token bucket per address, so that a guessed token costs an attacker
// time. Each replica counts on its own.
package ratelimit

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimitedClients bounds the addresses the login limiter remembers; past
// it, addresses whose bucket has refilled are forgotten.
const maxLimitedClients = 10000

// Limiter bounds the login attempts of each client address (a token
// bucket per address): a guessed token costs an attacker time. Each
// replica counts on its own, so N replicas allow N times the rate.
type Limiter struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu      sync.Mutex
	clients map[string]*rate.Limiter
}

// New returns a Limiter that allows perMinute attempts a minute to each
// address, burst of them at once (at least one each).
func New(perMinute, burst int) *Limiter {
	return &Limiter{every: time.Minute / time.Duration(max(perMinute, 1)), burst: max(burst, 1),
		now: time.Now, clients: map[string]*rate.Limiter{}}
}

// Allow takes one attempt from addr's bucket; when it is empty it answers
// how long until the next attempt is allowed.
func (l *Limiter) Allow(addr string) (bool, time.Duration) {
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
func (l *Limiter) forgetIdle(now time.Time) {
	for addr, lim := range l.clients {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.clients, addr)
		}
	}
}

// ClientAddr is the address a request came from (the peer; a proxy in
// front of the console is one client unless it is bypassed).
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
