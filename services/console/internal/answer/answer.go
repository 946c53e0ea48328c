// Package answer records what a handler answered — its status and the
// start of its body — for the rooms that act on an answer after it was
// written (the audit, the Idempotency-Key guard).
package answer

import (
	"bytes"
	"net/http"
)

// Recorder is an http.ResponseWriter that passes everything on and keeps
// the status (200 when the handler wrote a body without one) and the
// first Limit bytes of the body.
type Recorder struct {
	http.ResponseWriter
	Limit  int
	Status int
	Body   bytes.Buffer
}

// WriteHeader keeps the first status and passes it on.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

// Write keeps the body while it is under Limit and passes it on.
func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	if r.Body.Len() < r.Limit {
		r.Body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}
