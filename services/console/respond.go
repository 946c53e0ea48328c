package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/rs/zerolog"
)

// apiError is an error with the HTTP status and code the API answers.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Message }

// Errors by status; each takes the message shown to the client. Every
// code is documented in openapi.json (components.responses) and API.md.
func badRequest(msg string) error { return &apiError{http.StatusBadRequest, "bad_request", msg} }
func notFound(msg string) error   { return &apiError{http.StatusNotFound, "not_found", msg} }
func conflict(msg string) error   { return &apiError{http.StatusConflict, "conflict", msg} }
func tooLarge(msg string) error   { return &apiError{http.StatusRequestEntityTooLarge, "too_large", msg} }
func unavailable(msg string) error {
	return &apiError{http.StatusServiceUnavailable, "unavailable", msg}
}
func unauthorized(msg string) error { return &apiError{http.StatusUnauthorized, "unauthorized", msg} }
func forbidden(code, msg string) error {
	return &apiError{http.StatusForbidden, code, msg}
}
func methodNotAllowed(msg string) error {
	return &apiError{http.StatusMethodNotAllowed, "method_not_allowed", msg}
}
func unsupportedMediaType(msg string) error {
	return &apiError{http.StatusUnsupportedMediaType, "unsupported_media_type", msg}
}

// unavailableBecause is unavailable(msg) that keeps cause for the log: the
// client reads a plain text, never the internal error (an address, a
// driver's text).
func unavailableBecause(msg string, cause error) error {
	return &causedError{apiError: apiError{http.StatusServiceUnavailable, "unavailable", msg}, cause: cause}
}

// causedError is an answer with an internal cause that is logged, not
// shown.
type causedError struct {
	apiError
	cause error
}

func (e *causedError) Error() string { return e.Message + ": " + e.cause.Error() }
func (e *causedError) Unwrap() error { return e.cause }

// classify maps an error of the shared packages to what the API answers;
// anything unknown is an internal error whose detail stays in the log.
func classify(err error) *apiError {
	var ae *apiError
	var ce *causedError
	switch {
	case errors.As(err, &ce):
		return &ce.apiError
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, task.ErrNotFound), errors.Is(err, dlq.ErrNotFound), errors.Is(err, errTaskNotFound),
		errors.Is(err, dub.ErrNotFound):
		return &apiError{http.StatusNotFound, "not_found", err.Error()}
	case errors.Is(err, task.ErrRefused), errors.Is(err, dlq.ErrReplayed), errors.Is(err, dlq.ErrTaskDone),
		errors.Is(err, dlq.ErrNotReplayable):
		return &apiError{http.StatusConflict, "conflict", err.Error()}
	}
	return &apiError{http.StatusInternalServerError, "internal", "internal error"}
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err, logging internal errors with their detail. The
// message repeats no value of the client's whole (capEchoes).
func writeError(w http.ResponseWriter, r *http.Request, log zerolog.Logger, err error) {
	ae := *classify(err)
	if ae.Status >= 500 {
		log.Error().Err(err).Str("method", r.Method).Str("path", cutEcho(r.URL.Path)).Msg("request failed")
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dubflow"`)
	}
	// No scratch path of the console's own (an upload's temporary file) or
	// Go struct name reaches the client, whichever package wrote the text.
	ae.Message = capEchoes(wire.ErrorText(ae.Message))
	writeJSON(w, ae.Status, &ae)
}

// Bounds of what an error message repeats of a request: a value quoted in
// it (an id, a parameter) or any unbroken run of characters (a path) keeps
// at most maxEcho characters, the message at most maxMessage; what is cut
// ends with "…".
const (
	maxEcho    = 100
	maxMessage = 1000
)

// echoed matches a quoted value (as %q writes it) or a run of characters
// without spaces or quotes.
var echoed = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|[^\s"]+`)

// capEchoes shortens every value msg repeats to maxEcho characters and msg
// to maxMessage, so that a 100 kB id is not sent back whole.
func capEchoes(msg string) string {
	msg = echoed.ReplaceAllStringFunc(msg, func(v string) string {
		if utf8.RuneCountInString(v) <= maxEcho+2 {
			return v
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			return `"` + cut(v[1:len(v)-1], maxEcho) + `"`
		}
		return cut(v, maxEcho)
	})
	if utf8.RuneCountInString(msg) > maxMessage {
		msg = cut(msg, maxMessage)
	}
	return msg
}

// cut returns the first n characters of s followed by "…".
func cut(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
