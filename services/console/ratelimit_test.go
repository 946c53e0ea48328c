package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
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
