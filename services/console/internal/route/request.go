package route

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// DefaultPage is the page size of a list when ?limit= is not given.
const DefaultPage = 50

// TaskID reads the {id} path value.
func TaskID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, apierr.BadRequest(fmt.Sprintf("task id %q: want a UUID", apierr.Short(r.PathValue("id"))))
	}
	return id, nil
}

// TaskIDAndBody reads the {id} path value and the JSON body into v.
func TaskIDAndBody(r *http.Request, v any) (uuid.UUID, error) {
	id, err := TaskID(r)
	if err != nil {
		return uuid.Nil, err
	}
	return id, jsonbody.Decode(r, v)
}

// Limit reads the ?limit= parameter: def when absent, else 1..most.
func Limit(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, apierr.BadRequest(fmt.Sprintf("limit %q: want 1..%d", apierr.Short(v), most))
	}
	return n, nil
}

// Since reads a since value (dlq.ParseSince, which the rooms that read a
// time range pass: an RFC 3339 time, a date, or a duration back from now).
type Since func(s string, now time.Time) (time.Time, error)

// TimeRange reads since and until by parse; nil when not given.
func TimeRange(since, until string, parse Since) (*time.Time, *time.Time, error) {
	now := time.Now()
	var out [2]*time.Time
	for i, v := range []string{since, until} {
		if v == "" {
			continue
		}
		t, err := parse(v, now)
		if err != nil {
			return nil, nil, apierr.BadRequest(strings.Replace(err.Error(), "since", []string{"since", "until"}[i], 1))
		}
		out[i] = &t
	}
	return out[0], out[1], nil
}
