package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/audit"
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
	f.srv.auditLog().FlushRefusals(ctx)

	var page audit.Page
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
	f.srv.auditLog().FlushRefusals(ctx)
	f.doJSON(t, "GET", "/api/audit?action=refused", nil, http.StatusOK, &page)
	if len(page.Entries) != len(want) {
		t.Fatalf("%d refused rows after a second flush, want %d", len(page.Entries), len(want))
	}
}
