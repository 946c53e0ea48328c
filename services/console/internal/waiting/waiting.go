// Package waiting is the console's read-only view of the waiting queue:
// GET routes relayed to the dispatcher's API (DISPATCHER_URL), with nothing
// malformed forwarded and the dispatcher's error codes answered as the
// console's own.
package waiting

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
)

// maxProxyBytes bounds a dispatcher answer relayed to the client (the
// dispatcher bounds its lists well below it).
const maxProxyBytes = 4 << 20

// waitingLimits is the largest ?limit= of each dispatcher route the
// console relays (the dispatcher's openapi.json; also its default), 0 for
// a route that takes none.
var waitingLimits = map[string]int{
	"/queue/projects":                1000,
	"/queue/projects/{id}/status":    100,
	"/queue/agents/{agentId}/status": 1000,
	"/queue/entries/{id}":            0,
}

// Proxy relays the console's waiting-queue routes to the dispatcher.
type Proxy struct {
	// Dispatcher is the dispatcher's base URL and API token now (a URL of
	// "": not configured, 503).
	Dispatcher func() (url, token string)
	// Fail answers an error.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
}

// Route relays a GET to the dispatcher's API (read-only view of the
// waiting queue): target is the dispatcher's path pattern, its {names}
// filled from the request's path values. Nothing malformed is forwarded:
// every path value must be a canonical, non-nil UUID and the query may
// only hold the route's limit (0..its maximum), or the console answers 400
// itself. The dispatcher's answer is relayed when it is a 200; its errors
// are answered with the console's own codes (dispatcherError).
func (px Proxy) Route(target string) http.HandlerFunc {
	client := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := waitingTarget(target, r)
		if err != nil {
			px.Fail(w, r, err)
			return
		}
		base, token := px.Dispatcher()
		if base == "" {
			px.Fail(w, r, apierr.Unavailable("the waiting-queue view needs DISPATCHER_URL and DISPATCHER_API_TOKEN"))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+p, nil)
		if err != nil {
			px.Fail(w, r, err)
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			px.Fail(w, r, apierr.Unavailable("the dispatcher cannot be reached"))
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxProxyBytes+1))
		switch {
		case err != nil:
			px.Fail(w, r, apierr.Unavailable("the dispatcher's answer was cut off"))
		case len(body) > maxProxyBytes:
			px.Fail(w, r, apierr.Unavailable("the dispatcher's answer is over 4 MiB"))
		case resp.StatusCode != http.StatusOK:
			px.Fail(w, r, dispatcherError(resp.StatusCode, body))
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(body)
		}
	}
}

// waitingTarget is the dispatcher path and query a request for target
// asks for, or a 400 saying what is malformed.
func waitingTarget(target string, r *http.Request) (string, error) {
	p := target
	for _, name := range []string{"id", "agentId"} {
		if !strings.Contains(target, "{"+name+"}") {
			continue
		}
		v := r.PathValue(name)
		if !canonicalUUID(v) {
			return "", apierr.BadRequest(fmt.Sprintf("%s %q: want a UUID like 6f0c7a52-3b1e-4d8e-9a57-1f2b7c0d4e13", name, apierr.Short(v)))
		}
		p = strings.ReplaceAll(p, "{"+name+"}", v)
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return "", apierr.BadRequest("the query string does not parse")
	}
	most := waitingLimits[target]
	for name, vs := range q {
		if name != "limit" || most == 0 {
			return "", apierr.BadRequest(fmt.Sprintf("unknown query parameter %q", apierr.Short(name)))
		}
		if len(vs) != 1 {
			return "", apierr.BadRequest("limit is given more than once")
		}
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 0 || n > most {
			return "", apierr.BadRequest(fmt.Sprintf("limit must be an integer between 0 and %d", most))
		}
		p += "?limit=" + strconv.Itoa(n)
	}
	return p, nil
}

// canonicalUUID reports whether s is a UUID in its canonical form (36
// characters, 8-4-4-4-12 hex digits) other than the nil UUID: what the
// dispatcher takes. Braces, urn:uuid: and unhyphenated forms, which
// uuid.Parse also reads, are refused here rather than forwarded.
func canonicalUUID(s string) bool {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return false
	}
	id, err := uuid.Parse(s)
	return err == nil && id != uuid.Nil
}

// dispatcherError is what the console answers for a dispatcher error:
// the dispatcher's codes mapped to the console's (API.md), its message
// kept only where it is about the caller's request (a malformed value, an
// unknown entry); anything that is the console's or the dispatcher's own
// trouble is 503 unavailable.
func dispatcherError(status int, body []byte) error {
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	switch e.Code {
	case "VALIDATION_ERROR", "BUSINESS_QUEUE_FULL":
		return apierr.BadRequest(e.Message)
	case "NOT_FOUND":
		return apierr.NotFound(e.Message)
	case "BUSINESS_IDEMPOTENCY_VIOLATION", "BUSINESS_NOT_WAITING", "BUSINESS_NOT_ASSIGNED",
		"BUSINESS_NOTHING_TO_RELEASE", "BUSINESS_AGENT_BUSY":
		return apierr.Conflict(e.Message)
	case "PAYLOAD_TOO_LARGE":
		return apierr.TooLarge(e.Message)
	case "UNAUTHORIZED":
		// Not the caller's credentials: the console's own token is wrong.
		return apierr.Unavailable("the dispatcher refused DISPATCHER_API_TOKEN")
	}
	return apierr.Unavailable(fmt.Sprintf("the dispatcher answered %d", status))
}
