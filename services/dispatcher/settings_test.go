package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/google/uuid"
)

// TestReservationTimeoutChangesWhileRunning: the dispatcher seeds
// queue.service_reservation_timeout from QUEUE_RESERVATION_TIMEOUT_SECONDS
// (an hour: assignments wait to be confirmed); set to 0 while it runs, the
// next assignment is confirmed at once, without a restart.
func TestReservationTimeoutChangesWhileRunning(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), map[string]string{"QUEUE_RESERVATION_TIMEOUT_SECONDS": "3600"}))
	project, staff := uuid.New(), uuid.New()
	if code := d.call(t, "PUT", "/staff/"+staff.String(), map[string]any{"project_id": project, "availability": "online", "max_concurrent": 2}, nil); code != 200 {
		t.Fatalf("put staff: %d", code)
	}
	type entry struct {
		entryJSON
		ReservedUntil *time.Time `json:"reserved_until"`
		ConfirmedAt   *time.Time `json:"confirmed_at"`
	}
	assign := func() entry {
		t.Helper()
		var a entryJSON
		d.call(t, "POST", "/internal/ai/events", aiEvent(project, uuid.New(), "normal"), &a)
		var e entry
		if code := d.call(t, "GET", "/queue/entries/"+a.EntryID.String(), nil, &e); code != 200 || e.Status != "assigned" {
			t.Fatalf("entry: %d %+v, want assigned", code, e)
		}
		return e
	}
	if e := assign(); e.ReservedUntil == nil || e.ConfirmedAt != nil {
		t.Fatalf("with an hour's timeout: %+v, want an unconfirmed reservation", e)
	}
	if _, err := setting.Set(context.Background(), db.Pool, setting.ReservationTimeout, "0", "operator"); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("dubflow_setting{key=%q} 0\n", setting.ReservationTimeout)
	testenv.EventuallyWithin(t, setting.Poll+time.Second, "the dispatcher to take the change", func() bool {
		_, body := get(t, d.ops+"/metrics")
		return strings.Contains(body, want)
	})
	if e := assign(); e.ReservedUntil != nil || e.ConfirmedAt == nil {
		t.Fatalf("after the timeout was set to 0: %+v, want an assignment confirmed at once", e)
	}
}
