package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// ParseID parses a dead letter id argument (a usage error when malformed).
func ParseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, UsageError(fmt.Errorf("dead letter ID %q: want a positive number (see dubctl dlq list)", s))
	}
	return id, nil
}

// CheckLimit refuses a limit the console refuses.
func CheckLimit(limit int) error {
	if limit < 1 || limit > 1000 {
		return UsageError(fmt.Errorf("--limit %d: want 1..1000", limit))
	}
	return nil
}

// Now is the time relative filters (--since 2h) count back from.
var Now = time.Now

// TimeRange reads --since and --until with parse (dlq.ParseSince: an RFC
// 3339 time, a date, or a duration back from now), nil when not given; the
// error reads as the console's for ?since= and ?until=.
func TimeRange(parse func(string, time.Time) (time.Time, error), since, until string) (*time.Time, *time.Time, error) {
	var out [2]*time.Time
	for i, v := range []string{since, until} {
		if v == "" {
			continue
		}
		t, err := parse(v, Now())
		if err != nil {
			if i == 1 {
				err = errors.New(strings.Replace(err.Error(), "since", "until", 1))
			}
			return nil, nil, UsageError(err)
		}
		out[i] = &t
	}
	return out[0], out[1], nil
}

// ParseTaskID parses a task id argument (a usage error when malformed).
func ParseTaskID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, UsageError(fmt.Errorf("task id %q: want a UUID", s))
	}
	return id, nil
}
