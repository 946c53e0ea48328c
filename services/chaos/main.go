// Command chaos is dubflow's own chaos run (make chaos): it starts a
// private RabbitMQ, Postgres and MinIO, runs the real services against them
// through toxiproxy proxies, submits short real-speech videos with dubctl
// while it kills the services with SIGKILL, restarts and crashes the
// backing services and cuts, stalls and slows their connections, and then
// checks that every task ended done with a valid output and that no effect
// happened twice. It exits 0 when the run passed, 1 when it found a
// defect, 2 when it could not run, 130 when interrupted. Everything it
// started is stopped and removed at the end, also on Ctrl-C (-keep keeps
// the work folder).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole run; the returned code is the process's exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseOptions(args, os.Getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitPass
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return exitError
	}
	wd, err := os.Getwd()
	if err == nil {
		err = o.resolve(wd)
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return exitError
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	r := &runner{o: o, out: stdout, start: time.Now(), cl: &cleanups{}}
	r.logf("seed %d (repeat with -seed %d); %d tasks, faults for %s, settle within %s", o.seed, o.seed, o.tasks, o.duration, o.settle)
	defer r.cl.run()
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
	o     options
	out   io.Writer
	start time.Time
	cl    *cleanups
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
	return rand.New(rand.NewPCG(r.o.seed, stream))
}

// submitAll submits the tasks with four dubctl processes at a time, spread
// over spread, and returns how many submissions were confirmed.
func (r *runner) submitAll(ctx context.Context, sub *submitter, clips []clip, spread time.Duration) int {
	rng := r.rng(4)
	picks := make([]clip, r.o.tasks)
	for i := range picks {
		picks[i] = clips[rng.IntN(len(clips))]
	}
	every := spread / time.Duration(r.o.tasks)
	next := make(chan int)
	var mu sync.Mutex
	ok, retried := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range next {
				targets := ""
				if r.o.languages > 0 && i%r.o.languages == r.o.languages-1 {
					targets = twoLanguages
				}
				_, tries, err := sub.submit(ctx, picks[i], targets, i)
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
	r.logf("submitted %d of %d tasks (%d needed more than one try)", ok, r.o.tasks, retried)
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
		sleepCtx(ctx, 30*time.Second)
		if ctx.Err() != nil {
			return
		}
		rows, err := pool.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status ORDER BY status`)
		if err != nil {
			r.logf("progress: %v", oneLine(err.Error(), 100))
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
	cmd.Env = environ(env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// allReady reports whether every service answers /readyz.
func (ps *procs) allReady() bool {
	for _, p := range ps.list {
		if !p.ready() {
			return false
		}
	}
	return true
}

// createDatabase creates the dubflow database on the private server.
func createDatabase(ctx context.Context, pg *postgres) error {
	cfg, err := pgx.ParseConfig(pg.url(pg.port))
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
		"S3_ENDPOINT": s3, "S3_ACCESS_KEY": s3AccessKey, "S3_SECRET_KEY": s3SecretKey,
		"S3_BUCKET": s3Bucket, "S3_USE_SSL": "false",
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

// environ turns env into KEY=value lines, with PATH, HOME and LANG from
// this process.
func environ(env map[string]string) []string {
	var out []string
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v := os.Getenv(k); v != "" {
			out = append(out, k+"="+v)
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
