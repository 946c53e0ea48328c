package view

import (
	"context"
	"encoding/json"
)

// MaxTimingReportBytes bounds the timing report read into a task's detail.
const MaxTimingReportBytes = 8 << 20

// Getter reads an object of at most limit bytes.
type Getter interface {
	Get(ctx context.Context, key string, limit int64) ([]byte, error)
}

// ReadTimingReport fills t.TimingReport from the report its result names;
// it stays null when there is none or it is unreadable.
func ReadTimingReport(ctx context.Context, objects Getter, t *Task) {
	key := OutputOf(t.Result).TimingReportKey
	if key == "" {
		return
	}
	if b, err := objects.Get(ctx, key, MaxTimingReportBytes); err == nil && json.Valid(b) {
		t.TimingReport = b
	}
}
