package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRefusedRequestsAndLogoutAreAudited: a flood of requests with a bad
// token is one audit row that counts them; a CSRF failure names the
// session's token; a read-only token's write is refused and audited; a
// logout is audited with the token's name.
func TestRefusedRequestsAndLogoutAreAudited(t *testing.T) {
	t.Parallel()
	f := setup(t, withNamedTokens)
	ctx := context.Background()
	const flood = 40
	for range flood {
		decode(t, f.do(t, "GET", "/api/tasks", "wrong-token", "", nil), http.StatusUnauthorized, nil)
	}
	decode(t, f.do(t, "POST", "/api/queues/asr/pause", bobToken, "application/json", nil), http.StatusForbidden, nil)
	cookie, csrf := f.login(t, aliceToken)
	decode(t, f.withSession(t, "POST", "/api/uploads", cookie, ""), http.StatusForbidden, nil)
	decode(t, f.withSession(t, "POST", "/api/logout", cookie, csrf), http.StatusNoContent, nil)
	decode(t, f.withSession(t, "GET", "/api/tasks", cookie, ""), http.StatusUnauthorized, nil)
	f.srv.flushRefusals(ctx)

	var page auditPage
	f.doJSON(t, "GET", "/api/audit?action=refused", nil, http.StatusOK, &page)
	got := map[string]float64{}
	for _, e := range page.Entries {
		got[fmt.Sprintf("%s|%s|%s|%d", e.Actor, e.Target, strings.SplitN(e.Outcome, ":", 2)[0], e.Status)] = e.Detail["count"].(float64)
	}
	want := map[string]float64{
		"|GET /api/tasks|unauthorized|401":                flood,
		"alice|GET /api/tasks|unauthorized|401":           1, // the logged-out session
		"bob|POST /api/queues/{step}/pause|forbidden|403": 1,
		"alice|POST /api/uploads|csrf|403":                1,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refused rows\n got %v\nwant %v", got, want)
	}
	f.doJSON(t, "GET", "/api/audit?action=logout", nil, http.StatusOK, &page)
	if len(page.Entries) != 1 || page.Entries[0].Actor != "alice" || page.Entries[0].Outcome != "ok" {
		t.Fatalf("logout entries %+v, want alice's", page.Entries)
	}
	// Flushed counts are not written twice.
	f.srv.flushRefusals(ctx)
	f.doJSON(t, "GET", "/api/audit?action=refused", nil, http.StatusOK, &page)
	if len(page.Entries) != len(want) {
		t.Fatalf("%d refused rows after a second flush, want %d", len(page.Entries), len(want))
	}
}

// TestRefusalKeysAreBounded: however many different refusals come within
// a window, at most maxRefusalKeys+1 rows are written for it.
func TestRefusalKeysAreBounded(t *testing.T) {
	t.Parallel()
	var rs refusals
	now := time.Now()
	for i := range 10 * maxRefusalKeys {
		rs.note(refusalKey{actor: fmt.Sprint("token-", i), target: "GET /api/tasks", outcome: "unauthorized: x", status: 401}, now, "/api/tasks")
	}
	counts := rs.take()
	total := 0
	for _, c := range counts {
		total += c.n
	}
	if len(counts) != maxRefusalKeys+1 || total != 10*maxRefusalKeys {
		t.Fatalf("%d keys counting %d refusals, want %d keys counting %d", len(counts), total, maxRefusalKeys+1, 10*maxRefusalKeys)
	}
	if len(rs.take()) != 0 {
		t.Fatal("take did not start a new window")
	}
}
