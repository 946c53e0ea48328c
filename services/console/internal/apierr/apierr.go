// Package apierr is the errors the console's API answers: each carries
// the HTTP status, the code and the message the client reads. Every code
// is documented in openapi.json (components.responses) and API.md.
package apierr

import (
	"errors"
	"net/http"
)

// Error is an error with the HTTP status and code the API answers.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Errors by status; each takes the message shown to the client.

// BadRequest is 400 bad_request.
func BadRequest(msg string) error { return &Error{http.StatusBadRequest, "bad_request", msg} }

// NotFound is 404 not_found.
func NotFound(msg string) error { return &Error{http.StatusNotFound, "not_found", msg} }

// Conflict is 409 conflict.
func Conflict(msg string) error { return &Error{http.StatusConflict, "conflict", msg} }

// TooLarge is 413 too_large.
func TooLarge(msg string) error { return &Error{http.StatusRequestEntityTooLarge, "too_large", msg} }

// Unavailable is 503 unavailable.
func Unavailable(msg string) error { return &Error{http.StatusServiceUnavailable, "unavailable", msg} }

// Unauthorized is 401 unauthorized.
func Unauthorized(msg string) error { return &Error{http.StatusUnauthorized, "unauthorized", msg} }

// Forbidden is 403 with code.
func Forbidden(code, msg string) error { return &Error{http.StatusForbidden, code, msg} }

// MethodNotAllowed is 405 method_not_allowed.
func MethodNotAllowed(msg string) error {
	return &Error{http.StatusMethodNotAllowed, "method_not_allowed", msg}
}

// UnsupportedMediaType is 415 unsupported_media_type.
func UnsupportedMediaType(msg string) error {
	return &Error{http.StatusUnsupportedMediaType, "unsupported_media_type", msg}
}

// UnavailableBecause is Unavailable(msg) that keeps cause for the log:
// the client reads a plain text, never the internal error (an address, a
// driver's text).
func UnavailableBecause(msg string, cause error) error {
	return &caused{answer: Error{http.StatusServiceUnavailable, "unavailable", msg}, cause: cause}
}

// caused is an answer with an internal cause that is logged, not shown.
type caused struct {
	answer Error
	cause  error
}

func (e *caused) Error() string { return e.answer.Message + ": " + e.cause.Error() }
func (e *caused) Unwrap() error { return e.cause }

// As finds the answer err carries, if any (an internal cause stays out of
// it).
func As(err error) (*Error, bool) {
	var ae *Error
	var ce *caused
	switch {
	case errors.As(err, &ce):
		return &ce.answer, true
	case errors.As(err, &ae):
		return ae, true
	}
	return nil, false
}

// Short cuts a value echoed in an error to a readable length.
func Short(v string) string {
	if r := []rune(v); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return v
}

// StatusOf is the HTTP status err answers when it carries an answer, 0
// otherwise.
func StatusOf(err error) int {
	if ae, ok := As(err); ok {
		return ae.Status
	}
	return 0
}
