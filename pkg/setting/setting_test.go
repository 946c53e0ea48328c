package setting_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/setting"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/rs/zerolog"
)

// refusals are values each door must refuse, with the text it answers.
var refusals = []struct{ key, value, want string }{
	{setting.CentralBatchSize, "5", "queue.central_batch_size 5: want 10..200"},
	{setting.CentralBatchSize, "201", "queue.central_batch_size 201: want 10..200"},
	{setting.CentralBatchSize, "50.5", `queue.central_batch_size "50.5": want an integer`},
	{setting.CentralBatchSize, "fifty", `queue.central_batch_size "fifty": want an integer`},
	{setting.CentralBatchSize, "", `queue.central_batch_size "": want an integer`},
	{setting.CentralBatchSize, "050", `queue.central_batch_size "050": want an integer`},
	{setting.MetricsRetentionDays, "6", "monitoring.metrics_retention_days 6: want 7..90"},
	{setting.MetricsRetentionDays, "91", "monitoring.metrics_retention_days 91: want 7..90"},
	{setting.ReservationTimeout, "-1", "queue.service_reservation_timeout -1: want 0..3600"},
	{setting.ReservationTimeout, "1e3", `queue.service_reservation_timeout "1e3": want a number`},
	{setting.ReservationTimeout, "NaN", `queue.service_reservation_timeout "NaN": want a number`},
	{setting.PendingRetryInterval, "86400.5", "queue.pending_retry_interval 86400.5: want 0..86400"},
	{setting.StuckTaskThreshold, strings.Repeat("9", 201), "monitoring.stuck_task_threshold: want a value of at most 200 characters"},
}

// TestDoorsRefuseWithOneText: Check, the database's own check and a row
// written past pkg/setting refuse each bad value with the same text, and
// accept the good ones alike.
func TestDoorsRefuseWithOneText(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	problem := func(d setting.Def, value string) string {
		var p *string
		if err := db.Pool.QueryRow(ctx, `SELECT system_config_problem($1, $2, $3, $4)`, d.Key, value, d.Type,
			d.Constraints()).Scan(&p); err != nil {
			t.Fatal(err)
		}
		if p == nil {
			return ""
		}
		return *p
	}
	for _, r := range refusals {
		d, _ := setting.Lookup(r.key)
		err := d.Check(r.value)
		if err == nil || err.Error() != r.want || !errors.Is(err, setting.ErrInvalid) {
			t.Errorf("Check(%s, %q) = %v, want %q", r.key, r.value, err, r.want)
		}
		if got := problem(d, r.value); got != r.want {
			t.Errorf("system_config_problem(%s, %q) = %q, want %q", r.key, r.value, got, r.want)
		}
		_, err = db.Pool.Exec(ctx, `INSERT INTO system_config (key, value, value_type, constraints) VALUES ($1, $2, $3, $4)`,
			d.Key, r.value, d.Type, d.Constraints())
		var pg *pgconn.PgError
		if !errors.As(err, &pg) || pg.Message != r.want || pg.Code != "23514" {
			t.Errorf("raw INSERT of %s %q: %v, want check_violation %q", r.key, r.value, err, r.want)
		}
		if _, err := setting.Set(ctx, db.Pool, r.key, r.value, "test"); err == nil || err.Error() != r.want {
			t.Errorf("Set(%s, %q) = %v, want %q", r.key, r.value, err, r.want)
		}
	}
	for _, d := range setting.Catalogue {
		for _, v := range []string{d.Default, bound(d.Min), bound(d.Max)} {
			if err := d.Check(v); err != nil {
				t.Errorf("Check(%s, %q): %v", d.Key, v, err)
			}
			if p := problem(d, v); p != "" {
				t.Errorf("system_config_problem(%s, %q) = %q", d.Key, v, p)
			}
		}
	}
	if _, err := setting.Set(ctx, db.Pool, "queue.nothing", "1", "test"); !errors.Is(err, setting.ErrUnknown) {
		t.Errorf("Set of an unknown key: %v, want ErrUnknown", err)
	}
}

func bound(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// TestSeedGivesTheFirstValueOnly: the first start seeds from its
// environment (or the default); a later start with another value keeps
// the stored one and says so; a value the setting refuses stops a start.
func TestSeedGivesTheFirstValueOnly(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	seeded, err := setting.Seed(ctx, db.Pool, "dispatcher", map[string]string{"QUEUE_PROCESS_BATCH_SIZE": "80"})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]setting.Seeded{}
	for _, s := range seeded {
		byKey[s.Key] = s
	}
	if s := byKey[setting.CentralBatchSize]; !s.Inserted || s.Stored != "80" || s.From != "QUEUE_PROCESS_BATCH_SIZE" || s.Differs() {
		t.Errorf("first seed of the batch size: %+v", s)
	}
	if s := byKey[setting.ConcurrentWorkers]; !s.Inserted || s.Stored != "5" || s.From != "default" {
		t.Errorf("first seed of a default: %+v", s)
	}
	if _, ok := byKey[setting.MetricsRetentionDays]; ok {
		t.Error("the dispatcher seeded the console's setting")
	}
	got, err := setting.Get(ctx, db.Pool, setting.CentralBatchSize)
	if err != nil || got.Value != "80" || got.UpdatedBy != "dispatcher (QUEUE_PROCESS_BATCH_SIZE)" || got.UpdatedAt == nil {
		t.Fatalf("stored %+v, %v", got, err)
	}

	again, err := setting.Seed(ctx, db.Pool, "dispatcher", map[string]string{"QUEUE_PROCESS_BATCH_SIZE": "100"})
	if err != nil {
		t.Fatal(err)
	}
	if s := again[0]; s.Key != setting.CentralBatchSize || s.Inserted || s.Stored != "80" || !s.Differs() {
		t.Errorf("second seed: %+v, want the stored 80 kept and the difference told", s)
	}

	_, err = setting.Seed(ctx, db.Pool, "dispatcher", map[string]string{"QUEUE_PROCESS_BATCH_SIZE": "5"})
	if want := "QUEUE_PROCESS_BATCH_SIZE=5: queue.central_batch_size 5: want 10..200"; err == nil || err.Error() != want {
		t.Errorf("seed with a refused value: %v, want %q", err, want)
	}
	list, err := setting.List(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Key == setting.MetricsRetentionDays && (s.Value != "30" || s.UpdatedAt != nil || s.UpdatedBy != "") {
			t.Errorf("an unseeded setting lists as %+v, want its default and no update", s)
		}
	}
}

// TestWatchSeesAChangeAtOnce: a change is announced and read at once (the
// poll is an hour here); with the announcement gone, the poll reads it.
func TestWatchSeesAChangeAtOnce(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	for _, tc := range []struct {
		name   string
		notify bool
		poll   time.Duration
	}{{"notify", true, time.Hour}, {"poll", false, 200 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if !tc.notify {
				if _, err := db.Pool.Exec(ctx, `ALTER TABLE system_config DISABLE TRIGGER system_config_notify`); err != nil {
					t.Fatal(err)
				}
				defer db.Pool.Exec(context.Background(), `ALTER TABLE system_config ENABLE TRIGGER system_config_notify`)
			}
			w := setting.NewWatch(db.Pool, "console", map[string]string{"METRICS_RETENTION_DAYS": "14"}, zerolog.New(io.Discard))
			w.Poll = tc.poll
			if err := w.Start(ctx); err != nil {
				t.Fatal(err)
			}
			changed := make(chan struct{}, 16)
			w.OnChange(func() { changed <- struct{}{} })
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			want := 40
			if tc.notify {
				want = 60
			}
			set := time.Now()
			if _, err := setting.Set(ctx, db.Pool, setting.MetricsRetentionDays, strconv.Itoa(want), "test"); err != nil {
				t.Fatal(err)
			}
			deadline := time.After(testenv.Within(t, 5*time.Second))
			for w.Int(setting.MetricsRetentionDays) != want {
				select {
				case <-changed:
				case <-deadline:
					t.Fatalf("the watch still holds %d, want %d", w.Int(setting.MetricsRetentionDays), want)
				}
			}
			t.Logf("%s: the watch held the change %s after Set returned", tc.name, time.Since(set))
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWatchWithoutATable: a service that starts before the migration runs
// on its environment, else the defaults; a nil watch answers the defaults.
func TestWatchWithoutATable(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE system_config RENAME TO system_config_later`); err != nil {
		t.Fatal(err)
	}
	w := setting.NewWatch(db.Pool, "asr", map[string]string{"TRANSLATE_BATCH_SIZE": "7"}, zerolog.New(io.Discard))
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.Int(setting.TranslateBatchSize); got != 7 {
		t.Errorf("batch size %d, want the environment's 7", got)
	}
	if got := w.Int(setting.MaxEngineWaits); got != 10 {
		t.Errorf("max waits %d, want the default 10", got)
	}
	var none *setting.Watch
	if got := none.Seconds(setting.StuckTaskThreshold); got != 10*time.Minute {
		t.Errorf("a nil watch's stuck threshold %s, want the default 10m", got)
	}
	bad := setting.NewWatch(db.Pool, "asr", map[string]string{"TRANSLATE_BATCH_SIZE": "0"}, zerolog.New(io.Discard))
	if err := bad.Start(ctx); err == nil || err.Error() != "TRANSLATE_BATCH_SIZE=0: translate.batch_size 0: want 1..1000" {
		t.Errorf("start with a refused variable: %v", err)
	}
}
