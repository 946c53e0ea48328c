package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
)

func TestLoginIsRateLimitedPerClientAddress(t *testing.T) {
	t.Parallel()
	f := setup(t, func(c *Config) { c.LoginPerMinute, c.LoginBurst = 1, 2 })
	login := func(token string) *http.Response {
		return f.do(t, "POST", "/api/login", "", "application/json", strings.NewReader(`{"token":"`+token+`"}`))
	}
	decode(t, login("wrong-wrong-wrong-wrong"), http.StatusUnauthorized, nil)
	decode(t, login(adminToken), http.StatusOK, nil)
	// The bucket is empty: even the right token waits.
	resp := login(adminToken)
	var e apiError
	decode(t, resp, http.StatusTooManyRequests, &e)
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 60 || e.Code != "rate_limited" {
		t.Fatalf("429 with Retry-After %q and code %q, want 1..60 s and rate_limited", resp.Header.Get("Retry-After"), e.Code)
	}
	// Bearer tokens on other routes are not limited.
	decode(t, f.do(t, "GET", "/api/session", adminToken, "", nil), http.StatusOK, nil)
}

func TestLoginLimiterCountsEachAddressAndRefills(t *testing.T) {
	t.Parallel()
	clock := testenv.NewClock(time.Unix(1_700_000_000, 0))
	l := newLoginLimiter(6, 1) // one attempt each 10 s
	l.now = clock.Now
	if ok, _ := l.allow("10.0.0.1"); !ok {
		t.Fatal("first attempt refused")
	}
	ok, wait := l.allow("10.0.0.1")
	if ok || wait != 10*time.Second {
		t.Fatalf("second attempt: allowed %v, wait %v; want refused for 10s", ok, wait)
	}
	if ok, _ := l.allow("10.0.0.2"); !ok {
		t.Fatal("another address was refused")
	}
	clock.Advance(10 * time.Second)
	if ok, _ := l.allow("10.0.0.1"); !ok {
		t.Fatal("attempt after the refill refused")
	}
	// A refused attempt does not push the next one further out.
	clock.Advance(5 * time.Second)
	if ok, wait := l.allow("10.0.0.1"); ok || wait != 5*time.Second {
		t.Fatalf("early attempt: allowed %v, wait %v; want refused for 5s", ok, wait)
	}
	clock.Advance(5 * time.Second)
	if ok, _ := l.allow("10.0.0.1"); !ok {
		t.Fatal("refused attempts delayed the refill")
	}
	l.forgetIdle(clock.Now().Add(time.Minute))
	if len(l.clients) != 0 {
		t.Fatalf("%d idle addresses kept", len(l.clients))
	}
}
