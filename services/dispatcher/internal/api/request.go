package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/dubflow/dubflow/services/dispatcher/internal/agentqueue"
	"github.com/dubflow/dubflow/services/dispatcher/internal/queue"
	"github.com/google/uuid"
)

// The largest ?limit= of each list, also its default: what keeps every
// answer bounded (a project's status with maxStatusItems entries at their
// largest is well under 1 MiB; a test fills one).
const (
	maxProjects    = 1000
	maxStatusItems = 100
	maxAgentItems  = 1000
)

// limitKey is the context key of the checked ?limit=.
type limitKey struct{}

// limitOf is the request's checked limit (its route's default when none
// was given).
func limitOf(r *http.Request) int {
	n, _ := r.Context().Value(limitKey{}).(int)
	return n
}

// checkQuery refuses a query that does not parse, names a parameter the
// route does not take or gives one twice, and returns the limit (0..the
// route's Limit, default the route's Limit).
func checkQuery(r *http.Request, rt Route) (int, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, errors.New("the query string does not parse")
	}
	for name, vs := range q {
		if !(name == "limit" && rt.Limit > 0) && !slices.Contains(rt.Query, name) {
			return 0, fmt.Errorf("unknown query parameter %s", quoted(name))
		}
		if len(vs) > 1 {
			return 0, fmt.Errorf("query parameter %s is given %d times", quoted(name), len(vs))
		}
	}
	if rt.Limit == 0 || !q.Has("limit") {
		return rt.Limit, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 0 || n > rt.Limit {
		return 0, fmt.Errorf("limit must be an integer between 0 and %d", rt.Limit)
	}
	return n, nil
}

// jsonContent reports whether a Content-Type names JSON; none at all is
// taken as JSON (clients that send JSON without saying so keep working).
func jsonContent(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json"))
}

// quoted quotes a value of the request for a message: at most 40
// characters of it, control characters escaped.
func quoted(s string) string {
	if r := []rune(s); len(r) > 40 {
		return strconv.Quote(string(r[:40])) + "…"
	}
	return strconv.Quote(s)
}

// parseID reads the id named name (queue.ParseID), answering 400 itself
// when it is missing, malformed or nil.
func parseID(w http.ResponseWriter, name, raw string) (uuid.UUID, bool) {
	id, err := queue.ParseID(name, raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, CodeValidation, err.Error())
		return uuid.Nil, false
	}
	return id, true
}

// pathID reads the {id} path value.
func pathID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	return parseID(w, "id", r.PathValue("id"))
}

// decode reads a JSON body into v, answering 400 or 413 itself on failure.
// Its messages name the JSON fields, never the Go types behind them.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, "request body too large (at most 1 MiB)")
	case err != nil:
		writeError(w, http.StatusBadRequest, CodeValidation, "the body could not be read")
	case len(body) == 0:
		writeError(w, http.StatusBadRequest, CodeValidation, "missing JSON body")
	case !utf8.Valid(body):
		writeError(w, http.StatusBadRequest, CodeValidation, "the body is not valid UTF-8")
	default:
		if err := json.Unmarshal(body, v); err != nil {
			writeError(w, http.StatusBadRequest, CodeValidation, jsonProblem(err))
			return false
		}
		return true
	}
	return false
}

// jsonProblem words a JSON decoding error by the body's fields.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("invalid JSON body at byte %d", syntax.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Sprintf("the body must be a JSON object, not %s", typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must be %s, not %s", typ.Field, jsonTypeOf(typ.Type), typ.Value)
	}
	return "invalid JSON body"
}

// jsonTypeOf names the JSON type a Go type is read from.
func jsonTypeOf(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonTypeOf(t.Elem())
	}
	return "an object"
}

// reply answers 200 with v.
func reply[T any](w http.ResponseWriter, _ *http.Request, v T) {
	writeJSON(w, http.StatusOK, v)
}

// byID is the handler of a route that does one thing to the UUID in path
// value param: a malformed one is a 400, an error of do answers as fail
// maps it, and reply answers do's result.
func byID[T any](s *Server, param string, do func(context.Context, uuid.UUID) (T, error),
	reply func(http.ResponseWriter, *http.Request, T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := parseID(w, param, r.PathValue(param))
		if !ok {
			return
		}
		v, err := do(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		reply(w, r, v)
	}
}

// reply answers v with code, or the error's answer when err is not nil.
func (s *Server) reply(w http.ResponseWriter, r *http.Request, code int, v any, err error) {
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, code, v)
}

// fail maps domain errors to 4xx and anything else to a logged 500.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code := classify(err)
	msg := err.Error()
	switch code {
	case CodeInternal:
		s.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("request failed")
		msg = "internal error"
	case CodeCanceled:
		msg = "request canceled"
	}
	writeError(w, status, code, msg)
}

// classify is the status and code of an error.
func classify(err error) (int, string) {
	switch {
	case errors.Is(err, queue.ErrInvalid):
		return http.StatusBadRequest, CodeValidation
	case errors.Is(err, agentqueue.ErrQueueFull):
		return http.StatusBadRequest, CodeQueueFull
	case errors.Is(err, agentqueue.ErrNotOwner):
		return http.StatusForbidden, CodeForbidden
	case errors.Is(err, agentqueue.ErrDuplicate):
		return http.StatusConflict, CodeIdempotency
	case errors.Is(err, queue.ErrNotFound), errors.Is(err, agentqueue.ErrNotQueued):
		return http.StatusNotFound, CodeNotFound
	case errors.Is(err, queue.ErrNotWaiting):
		return http.StatusConflict, CodeNotWaiting
	case errors.Is(err, queue.ErrNotAssigned):
		return http.StatusConflict, CodeNotAssigned
	case errors.Is(err, queue.ErrNothingToRelease):
		return http.StatusConflict, CodeNothingToRelease
	case errors.Is(err, queue.ErrAgentBusy):
		return http.StatusConflict, CodeAgentBusy
	case errors.Is(err, context.Canceled):
		return 499, CodeCanceled
	}
	return http.StatusInternalServerError, CodeInternal
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
