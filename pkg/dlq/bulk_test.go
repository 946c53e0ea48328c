package dlq_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/dlq"
)

// TestBulkRequestMatch: a filter reads as a Match; a bad one is
// ErrBadFilter with the text both doors answer.
func TestBulkRequestMatch(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	m, err := dlq.BulkRequest{Step: "asr", ErrorClass: "permanent", Since: "2h", Until: "2026-01-02T11:30:00Z", Pending: true}.Match(now)
	if err != nil || m.Step != "asr" || !m.Since.Equal(now.Add(-2*time.Hour)) || m.Until.Minute() != 30 || !m.Pending {
		t.Fatalf("Match = %+v, %v", m, err)
	}
	for req, want := range map[dlq.BulkRequest]string{
		{Step: "transcode"}: `step "transcode": want one of [extract_audio asr translate tts mux_video]`,
		{Since: "soon"}:     `since "soon": want an RFC 3339 time, a date or a duration such as 2h or 7d`,
		{Until: "-1h"}:      `until "-1h": want an RFC 3339 time, a date or a duration such as 2h or 7d`,
	} {
		if _, err := req.Match(now); !errors.Is(err, dlq.ErrBadFilter) || err.Error() != want {
			t.Errorf("%+v: %v, want %q", req, err, want)
		}
	}
}
