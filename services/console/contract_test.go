package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/idempotent"
	"github.com/google/uuid"
)

// TestTheIssuesContractFindings: each finding of issue 47's "HTTP
// contract" answered as documented.
func TestTheIssuesContractFindings(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.insertTask(t, "running", time.Now())
	huge := bytes.Repeat([]byte(" "), 20<<20)
	for _, path := range []string{"/api/tasks/" + id.String() + "/cancel", "/api/login"} {
		var e apiError
		resp := f.do(t, "POST", path, adminToken, "application/json", bytes.NewReader(huge))
		decode(t, resp, http.StatusRequestEntityTooLarge, &e)
		if e.Code != "too_large" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("20 MB to %s: %+v, want too_large with nosniff", path, e)
		}
	}
	var e apiError
	decode(t, f.do(t, "POST", "/api/login", "", "application/x-www-form-urlencoded", strings.NewReader("token=x")),
		http.StatusUnsupportedMediaType, &e)
	if e.Code != "unsupported_media_type" {
		t.Errorf("a form to /api/login: %+v, want unsupported_media_type", e)
	}
	f.doJSON(t, "GET", "/api/audit?action=bogus", nil, http.StatusBadRequest, nil)
	f.doJSON(t, "GET", "/api/audit?action=cancel", nil, http.StatusOK, nil)
	f.doJSON(t, "GET", "/api/tasks?bogus=1", nil, http.StatusBadRequest, nil)
	f.doJSON(t, "GET", "/api/tasks/"+uuid.Nil.String(), nil, http.StatusBadRequest, nil)
}

// TestUnknownRoutesAuthenticateFirstAndWrongMethodsAre405: an unknown
// path is 401 without a token and 404 with one; a served path with another
// method is 405 with Allow (without a token only for a public route's
// path).
func TestUnknownRoutesAuthenticateFirstAndWrongMethodsAre405(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var e apiError
	decode(t, f.do(t, "GET", "/api/nothing-here", "", "", nil), http.StatusUnauthorized, nil)
	decode(t, f.do(t, "GET", "/api/nothing-here", readToken, "", nil), http.StatusNotFound, nil)
	decode(t, f.do(t, "GET", "/api/tasks/..%2f..%2fsystem/health", "", "", nil), http.StatusUnauthorized, nil)
	decode(t, f.do(t, "PUT", "/api/tasks", "", "", nil), http.StatusUnauthorized, nil)
	resp := f.do(t, "PUT", "/api/tasks", adminToken, "", nil)
	decode(t, resp, http.StatusMethodNotAllowed, &e)
	if resp.Header.Get("Allow") != "GET, HEAD, POST" || e.Code != "method_not_allowed" {
		t.Errorf("PUT /api/tasks: Allow %q, %+v", resp.Header.Get("Allow"), e)
	}
	if resp := f.do(t, "DELETE", "/api/login", "", "", nil); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Errorf("DELETE /api/login (public): %d Allow %q, want 405 Allow POST without a token", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// TestBodiesAndCancelReasonsAreChecked: a body's field of the wrong type
// or unknown is named in the API's terms; a cancel reason over 500
// characters is refused, one of 500 taken.
func TestBodiesAndCancelReasonsAreChecked(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.insertTask(t, "running", time.Now())
	var e apiError
	resp := f.do(t, "POST", "/api/tasks/"+id.String()+"/redub", adminToken, "application/json", strings.NewReader(`{"segment": "two", "text": "x"}`))
	decode(t, resp, http.StatusBadRequest, &e)
	if e.Message != `request body: field "segment": want a whole number, not a string` {
		t.Errorf("redub with a string segment: %q", e.Message)
	}
	resp = f.do(t, "POST", "/api/tasks/"+id.String()+"/cancel", adminToken, "application/json", strings.NewReader(`{"why": "x"}`))
	decode(t, resp, http.StatusBadRequest, &e)
	if e.Message != `request body: unknown field "why" (want reason)` {
		t.Errorf("cancel with an unknown field: %q", e.Message)
	}
	long, _ := json.Marshal(map[string]string{"reason": strings.Repeat("r", 3000)})
	decode(t, f.do(t, "POST", "/api/tasks/"+id.String()+"/cancel", adminToken, "application/json", bytes.NewReader(long)),
		http.StatusBadRequest, &e)
	if !strings.Contains(e.Message, "3000 characters, at most 500") {
		t.Errorf("a 3,000-character reason: %q", e.Message)
	}
	var sum taskSummary
	f.doJSON(t, "GET", "/api/tasks/"+id.String(), nil, http.StatusOK, &sum)
	if sum.Status != "running" {
		t.Errorf("task %s after refused cancels, want running", sum.Status)
	}
	ok, _ := json.Marshal(map[string]string{"reason": strings.Repeat("é", 500)})
	f.doJSON(t, "POST", "/api/tasks/"+id.String()+"/cancel", json.RawMessage(ok), http.StatusOK, &sum)
	if sum.Status != "cancelled" {
		t.Errorf("a 500-character reason: %+v", sum)
	}
}

// TestAuditActionsAreTheDocumentsEnum: GET /api/audit?action= takes
// exactly the actions the console records.
func TestAuditActionsAreTheDocumentsEnum(t *testing.T) {
	t.Parallel()
	p := apiContract["GET /api/audit"].Params["action"]
	if !slices.Equal(slices.Sorted(slices.Values(p.Enum)), slices.Sorted(slices.Values(auditlog.Actions))) {
		t.Errorf("openapi.json's actions %v, the console's %v", p.Enum, auditlog.Actions)
	}
}

// TestEveryErrorCodeIsDocumented: the codes the console answers with are
// the Error schema's enum, and each response of the document lists codes
// of that enum.
func TestEveryErrorCodeIsDocumented(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []string `json:"enum"`
						} `json:"code"`
					} `json:"properties"`
				} `json:"Error"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	all := doc.Components.Schemas.Error.Properties.Code.Enum
	for op, spec := range apiContract {
		for status, codes := range spec.Errors {
			for _, c := range codes {
				if !slices.Contains(all, c) {
					t.Errorf("%s %d: code %q is not in the Error schema's enum", op, status, c)
				}
			}
		}
	}
	for _, err := range []error{apierr.BadRequest(""), apierr.NotFound(""), apierr.Conflict(""), apierr.TooLarge(""), apierr.Unavailable(""), apierr.Unauthorized(""),
		apierr.Forbidden("forbidden", ""), apierr.Forbidden("csrf", ""), apierr.MethodNotAllowed(""), apierr.UnsupportedMediaType(""),
		idempotent.Conflict(""), classify(nil), &apiError{Code: "rate_limited"}} {
		if c := classify(err).Code; !slices.Contains(all, c) {
			t.Errorf("code %q is answered but not documented", c)
		}
	}
}
