package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/services/chaos/internal/observe"
	"github.com/dubflow/dubflow/services/chaos/internal/options"
	"github.com/dubflow/dubflow/services/chaos/internal/procs"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"github.com/dubflow/dubflow/services/chaos/internal/submit"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Exit codes.
const (
	exitPass        = 0
	exitFail        = 1
	exitError       = 2
	exitInterrupted = 130
)

// Main is the whole run; the returned code is the process's exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := options.Parse(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitPass
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return exitError
	}
	wd, err := os.Getwd()
	if err == nil {
		err = o.Resolve(wd)
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return exitError
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	r := &runner{o: o, out: stdout, start: time.Now(), cl: &stack.Cleanups{}}
	r.logf("seed %d (repeat with -seed %d); %d tasks, faults for %s, settle within %s", o.Seed, o.Seed, o.Tasks, o.Duration, o.Settle)
	defer r.cl.Run()
	code, err := r.run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			r.logf("interrupted: %v; stopping everything", err)
			return exitInterrupted
		}
		r.logf("error: %v", err)
		return exitError
	}
	return code
}

// runner holds one run's state.
type runner struct {
	o     options.Options
	out   io.Writer
	start time.Time
	cl    *stack.Cleanups
	mu    sync.Mutex
}

// logf prints a progress line with the time since the start.
func (r *runner) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "chaos %7s  %s\n", time.Since(r.start).Round(time.Second), fmt.Sprintf(format, args...))
}

// rng returns the random source of one stream of choices, derived from
// the seed, so that each stream repeats with the same seed.
func (r *runner) rng(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(r.o.Seed, stream))
}

// submitAll submits the tasks with four dubctl processes at a time, spread
// over spread, and returns how many submissions were confirmed.
func (r *runner) submitAll(ctx context.Context, sub *submit.Submitter, clips []submit.Clip, spread time.Duration) int {
	rng := r.rng(4)
	picks := make([]submit.Clip, r.o.Tasks)
	for i := range picks {
		picks[i] = clips[rng.IntN(len(clips))]
	}
	every := spread / time.Duration(r.o.Tasks)
	next := make(chan int)
	var mu sync.Mutex
	ok, retried := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range next {
				targets := ""
				if r.o.Languages > 0 && i%r.o.Languages == r.o.Languages-1 {
					targets = submit.TwoLanguages
				}
				_, tries, err := sub.Submit(ctx, picks[i], targets, i)
				mu.Lock()
				if err == nil {
					ok++
				}
				if tries > 1 {
					retried++
				}
				mu.Unlock()
				if err != nil {
					r.logf("task %d not submitted: %v", i, err)
				}
			}
		})
	}
	tick := time.NewTicker(max(every, time.Millisecond))
	for i := range picks {
		select {
		case next <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		<-tick.C
	}
	tick.Stop()
	close(next)
	wg.Wait()
	r.logf("submitted %d of %d tasks (%d needed more than one try)", ok, r.o.Tasks, retried)
	return ok
}

// settled reports whether every task has ended and the outbox is empty.
func (r *runner) settled(ctx context.Context, pool *pgxpool.Pool, submitted int) bool {
	var total, open, outbox int
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status NOT IN ('done', 'failed', 'cancelled')),
		(SELECT count(*) FROM outbox) FROM tasks`).Scan(&total, &open, &outbox)
	return err == nil && total >= submitted && open == 0 && outbox == 0
}

// progress prints the tasks by status every 30 s.
func (r *runner) progress(ctx context.Context, pool *pgxpool.Pool) {
	for {
		stack.SleepCtx(ctx, 30*time.Second)
		if ctx.Err() != nil {
			return
		}
		rows, err := pool.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status`)
		if err != nil {
			r.logf("progress: %v", observe.OneLine(err.Error(), 100))
			continue
		}
		var parts []string
		for rows.Next() {
			var st string
			var n int
			if rows.Scan(&st, &n) == nil {
				parts = append(parts, fmt.Sprintf("%s=%d", st, n))
			}
		}
		rows.Close()
		r.logf("tasks: %s", strings.Join(parts, " "))
	}
}

// command runs a program with env (and PATH, HOME) in its own process
// group.
func (r *runner) command(ctx context.Context, path string, env map[string]string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = procs.Environ(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// createDatabase creates the dubflow database on the private server.
func createDatabase(ctx context.Context, pg *stack.Postgres) error {
	cfg, err := pgx.ParseConfig(pg.URL(pg.Port))
	if err != nil {
		return err
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect to the private postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE dubflow"); err != nil {
		return fmt.Errorf("create database dubflow: %w", err)
	}
	return nil
}

// stackEnv is the environment naming one way to reach the stack.
func stackEnv(amqpURL, dbURL, s3 string) map[string]string {
	return map[string]string{
		"AMQP_URL": amqpURL, "DATABASE_URL": dbURL,
		"S3_ENDPOINT": s3, "S3_ACCESS_KEY": stack.S3AccessKey, "S3_SECRET_KEY": stack.S3SecretKey,
		"S3_BUCKET": stack.S3Bucket, "S3_USE_SSL": "false",
		"LOG_LEVEL": "info",
	}
}

// chaosDefaults are the settings the services run with unless the
// environment of chaos sets them: the reconciler looks often and re-drives
// a task stuck for five minutes (half the default), so that work lost to a
// fault is recovered within the settle bound; each worker runs four steps at
// a time, so that kills hit more work in flight.
var chaosDefaults = map[string]string{
	"WORKER_CONCURRENCY":            "4",
	"SHUTDOWN_GRACE_SECONDS":        "5",
	"RECONCILE_INTERVAL_SECONDS":    "5",
	"RECONCILE_LEASE_GRACE_SECONDS": "10",
	"RECONCILE_OUTBOX_AGE_SECONDS":  "10",
	"STUCK_TASK_SECONDS":            "300",
}

// passPrefixes are the settings that pass from the environment of chaos
// to the services.
var passPrefixes = []string{"ASR_", "TRANSLATE_", "TTS_", "MUX_", "WORKER_", "STEP_", "RECONCILE_", "STUCK_",
	"TIMEOUT_", "QUEUE_", "LOG_", "SHUTDOWN_", "MAX_", "EXTRACT_", "DEFAULT_"}

// serviceEnv is the services' environment: the proxied stack, the chaos
// defaults, and the settings passed through.
func serviceEnv(stack map[string]string, tmp string) map[string]string {
	env := map[string]string{"TMPDIR": tmp}
	for k, v := range chaosDefaults {
		env[k] = v
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		for _, p := range passPrefixes {
			if strings.HasPrefix(k, p) {
				env[k] = v
			}
		}
	}
	for k, v := range stack {
		env[k] = v
	}
	return env
}
