package main

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/dubflow/dubflow/pkg/dlq"
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/rs/zerolog"
)

// apiError is an error with the HTTP status and code the API answers
// (internal/apierr).
type apiError = apierr.Error

// classify maps an error of the shared packages to what the API answers;
// anything unknown is an internal error whose detail stays in the log.
func classify(err error) *apiError {
	if ae, ok := apierr.As(err); ok {
		return ae
	}
	switch {
	case errors.Is(err, task.ErrNotFound), errors.Is(err, dlq.ErrNotFound), errors.Is(err, errTaskNotFound),
		errors.Is(err, dub.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: err.Error()}
	case errors.Is(err, task.ErrRefused), errors.Is(err, dlq.ErrReplayed), errors.Is(err, dlq.ErrTaskDone),
		errors.Is(err, dlq.ErrNotReplayable):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err, logging internal errors with their detail. The
// message repeats no value of the client's whole (apierr.CapEchoes).
func writeError(w http.ResponseWriter, r *http.Request, log zerolog.Logger, err error) {
	ae := *classify(err)
	if ae.Status >= 500 {
		log.Error().Err(err).Str("method", r.Method).Str("path", apierr.CutEcho(r.URL.Path)).Msg("request failed")
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dubflow"`)
	}
	// No scratch path of the console's own (an upload's temporary file) or
	// Go struct name reaches the client, whichever package wrote the text.
	ae.Message = apierr.CapEchoes(wire.ErrorText(ae.Message))
	writeJSON(w, ae.Status, &ae)
}
