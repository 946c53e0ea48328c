package recovery_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/recovery"
	"github.com/dubflow/dubflow/pkg/service"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// syncBuffer is a log the process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAtStartRecoversWhatDeadProcessesLeft: a service starting after a
// crash reaps the dead replica's engine reservation (its slots freed),
// closes the attempt of an ended task it left running, counts the live
// task's attempt whose lease ran out (left to the redelivery), publishes
// the outbox row nobody published, declares the queues again, runs the
// service's own pass, and logs it all on one line.
func TestAtStartRecoversWhatDeadProcessesLeft(t *testing.T) {
	t.Parallel()
	b := testenv.NewBackends(t)
	ctx := context.Background()
	db := b.DB.Pool
	done, live := uuid.New(), uuid.New()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO engine_schedule (step, name, in_flight) VALUES ('tts', 'e1', 3)`)
	exec(`INSERT INTO engine_reservations (step, name, units, expires_at, owner, slots) VALUES
		('tts', 'e1', 0, now() - interval '1 minute', 'dead', 2), ('tts', 'e1', 0, now() + interval '1 hour', 'alive', 1)`)
	exec(`INSERT INTO tasks (id, status) VALUES ($1, 'done'), ($2, 'running')`, done, live)
	exec(`INSERT INTO task_steps (task_id, step, attempt, status, worker, lease_until) VALUES
		($1, 'tts', 1, 'running', 'dead', now() - interval '1 minute'),
		($2, 'asr', 1, 'running', 'dead', now() - interval '1 minute')`, done, live)
	env, err := wire.New(wire.StepASR, live, "", wire.ASR{AudioKey: wire.DefaultKeys(live).SourceAudio, Language: "en",
		OutputKey: wire.DefaultKeys(live).ASR})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := env.Marshal()
	exec(`INSERT INTO outbox (message_id, exchange, routing_key, body, created_at) VALUES ($1, $2, $3, $4, now() - interval '1 minute')`,
		uuid.New(), wire.Exchange, wire.QueueASR, body)

	var log syncBuffer
	var cfg config.Common
	p, err := service.Start(ctx, "recovery-test", b.Env(nil), &cfg, service.LogTo(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rep, err := recovery.AtStart(ctx, p, recovery.Pass{Name: "own", Run: func(context.Context) (map[string]int, error) {
		return map[string]int{"repaired": 2}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ReservationsReaped != 1 || rep.AttemptsClosed != 1 || rep.LeasesExpired != 1 || rep.OutboxPublished != 1 ||
		rep.QueuesDeclared != len(p.Topology.Queues()) || rep.QueuesDeclared < len(wire.WorkQueues)+3 || rep.Passes["own"]["repaired"] != 2 {
		t.Errorf("report %+v", rep)
	}
	var inFlight, left int
	var status string
	if err := db.QueryRow(ctx, `SELECT in_flight, (SELECT count(*) FROM engine_reservations),
		(SELECT status FROM task_steps WHERE task_id = $1) FROM engine_schedule`, done).Scan(&inFlight, &left, &status); err != nil {
		t.Fatal(err)
	}
	if inFlight != 1 || left != 1 || status != "failed" {
		t.Errorf("in_flight %d, reservations %d, ended task's attempt %s; want 1 (the live lease's), 1, failed", inFlight, left, status)
	}
	msg, ok, err := testenv.Channel(t, b.AMQPURL).Get(wire.QueueASR, true)
	if err != nil || !ok || !bytes.Equal(msg.Body, body) {
		t.Errorf("the outbox row's message on %s: %v %v", wire.QueueASR, ok, err)
	}
	line := log.String()
	for _, want := range []string{`"message":"start-up recovery done"`, `"reservations_reaped":1`, `"attempts_closed":1`,
		`"leases_expired":1`, `"outbox_published":1`, `"own_repaired":2`} {
		if !strings.Contains(line, want) {
			t.Errorf("log lacks %s:\n%s", want, line)
		}
	}

	// Nothing left: a second start finds nothing to do.
	again, err := recovery.AtStart(ctx, p)
	if err != nil || again.ReservationsReaped+again.AttemptsClosed+again.OutboxPublished != 0 || again.LeasesExpired != 1 {
		t.Errorf("second pass %+v %v, want nothing done and the live lease still counted", again, err)
	}
}
