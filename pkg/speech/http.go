package speech

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
)

// DefaultHTTPTimeout bounds one request of a remote engine when the caller
// gives no http.Client of its own.
const DefaultHTTPTimeout = 2 * time.Minute

// maxResponseBytes bounds what a remote engine may send back (one
// segment's audio, or one batch's JSON).
const maxResponseBytes = 64 << 20

// HTTPError is a non-2xx answer of a remote engine. Whether it is worth a
// retry is carried by the error class (see classifyStatus), not by this type.
type HTTPError struct {
	StatusCode int
	// Body is the start of the response body, for the log and dead letter.
	Body string
}

// Error implements error.
func (e *HTTPError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("http %d", e.StatusCode)
	}
	return fmt.Sprintf("http %d: %s", e.StatusCode, e.Body)
}

// classifyStatus wraps err in the error class the status code calls for:
// 429 is transient with the Retry-After hint when one is given; 408 and
// 5xx are transient; every other status outside 2xx is permanent (the
// request itself is wrong: bad key, unknown model, unsupported pair).
func classifyStatus(err error, status int, header http.Header) error {
	switch {
	case status == http.StatusTooManyRequests:
		if d, ok := retryAfter(header.Get("Retry-After"), time.Now()); ok {
			return fault.RetryAfter(err, d)
		}
		return err
	case status == http.StatusRequestTimeout, status >= 500:
		return err
	default:
		return fault.Permanent(err)
	}
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// do sends req and returns the body of a 2xx answer. Connection errors,
// timeouts and body read errors are transient; other statuses are
// classified by classifyStatus. op names the call in errors. The trace of
// the message being worked on (wire.TraceOf) goes along as X-Request-Id,
// so that an engine's own logs can be matched with dubflow's.
func do(ctx context.Context, client *http.Client, req *http.Request, op string) ([]byte, http.Header, error) {
	if client == nil {
		client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if id := wire.TraceOf(ctx); id != "" && req.Header.Get("X-Request-Id") == "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, nil, fmt.Errorf("%s: %w", op, ctxErr)
		}
		return nil, nil, fmt.Errorf("%s: %w", op, err) // transient: connection refused, reset, client timeout
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: read response: %w", op, err)
	}
	if len(body) > maxResponseBytes {
		return nil, nil, fault.Permanent(fmt.Errorf("%s: response larger than %d bytes", op, maxResponseBytes))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		herr := &HTTPError{StatusCode: resp.StatusCode, Body: snippet(body)}
		return nil, nil, classifyStatus(fmt.Errorf("%s: %w", op, herr), resp.StatusCode, resp.Header)
	}
	return body, resp.Header, nil
}

// snippet returns the start of a response body as one line of clean text
// (wire.CleanText: an engine's body may hold NULs or invalid UTF-8, which
// Postgres cannot store) for errors, logs and dead letters.
func snippet(b []byte) string {
	if len(b) > 4096 {
		b = b[:4096]
	}
	s := strings.Join(strings.Fields(wire.CleanText(string(b))), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

// malformed marks an undecodable 2xx body as permanent: the server answered
// but not in the protocol we speak, which a retry does not change (a base
// URL pointing at the wrong service, a proxy's HTML page). Bodies of 5xx
// answers never get here: their status already made them transient.
func malformed(op string, err error) error {
	return fault.Permanent(fmt.Errorf("%s: malformed response: %w", op, err))
}

// Remote is where an engine behind HTTP is reached: the base URL its paths
// are appended to, the bearer key and the client. The engines that speak an
// API with a key embed it.
type Remote struct {
	// BaseURL is the server root the engine's paths are appended to.
	BaseURL string
	// APIKey is sent as a bearer token when not empty.
	APIKey string
	// Client sends the requests; one with DefaultHTTPTimeout when nil.
	Client *http.Client
}

// send makes a request of path on the server with the bearer key and
// returns the body of a 2xx answer (see do). A URL that cannot be built is
// permanent: setting names the configuration to check.
func (r *Remote) send(ctx context.Context, method, path string, body io.Reader, header http.Header, op, setting string) ([]byte, http.Header, error) {
	req, err := http.NewRequest(method, joinURL(r.BaseURL, path), body)
	if err != nil {
		return nil, nil, fault.Permanent(fmt.Errorf("%s: %w (check %s)", op, err, setting))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	bearer(req, r.APIKey)
	return do(ctx, r.Client, req, op)
}

// bearer sets the Authorization header when key is not empty.
func bearer(req *http.Request, key string) {
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
}

// joinURL appends path to base without doubling slashes.
func joinURL(base, path string) string {
	return strings.TrimRight(base, "/") + path
}
