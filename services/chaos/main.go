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
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/store"
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

func (r *runner) run(ctx context.Context) (int, error) {
	o := r.o
	work, err := os.MkdirTemp("", "dubflow-chaos-")
	if err != nil {
		return 0, err
	}
	r.cl.add(func() {
		if o.keep {
			r.logf("kept the work folder %s (service logs in logs/)", work)
			return
		}
		if err := os.RemoveAll(work); err != nil {
			r.logf("remove %s: %v", work, err)
		}
	})
	if err := os.Chmod(work, 0o755); err != nil {
		return 0, err
	}
	for _, d := range []string{"logs", "clips", "tmp", "outputs"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			return 0, err
		}
	}
	r.logf("work folder %s", work)

	// The private stack.
	clips, err := makeClips(ctx, r.rng(1), o.fixtures, filepath.Join(work, "clips"))
	if err != nil {
		return 0, err
	}
	r.logf("made %d clips of real speech", len(clips))
	rb, err := startRabbit(r.cl, r.logf)
	if err != nil {
		return 0, err
	}
	pg, err := startPostgres(ctx, work, r.cl)
	if err != nil {
		return 0, err
	}
	mn, err := startMinio(ctx, o.minio, work, r.cl)
	if err != nil {
		return 0, err
	}
	r.logf("private stack: rabbitmq %s, postgres 127.0.0.1:%d, minio 127.0.0.1:%d", rb.url(), pg.port, mn.port)
	if err := createDatabase(ctx, pg); err != nil {
		return 0, err
	}
	px := newProxies()
	r.cl.add(px.close)
	ports := map[string]int{}
	for name, upstream := range map[string]string{"rabbitmq": strings.TrimSuffix(strings.TrimPrefix(rb.url(), "amqp://guest:guest@"), "/"),
		"postgres": hostPort(pg.port), "minio": hostPort(mn.port)} {
		if ports[name], err = px.add(name, upstream); err != nil {
			return 0, err
		}
	}
	direct := stackEnv(rb.url(), pg.url(pg.port), hostPort(mn.port))
	proxied := stackEnv(fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", ports["rabbitmq"]), pg.url(ports["postgres"]), hostPort(ports["minio"]))
	if out, err := r.command(ctx, filepath.Join(o.bin, "migrate"), direct).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("migrate: %w\n%s", err, out)
	}
	pool, err := store.Open(ctx, direct["DATABASE_URL"])
	if err != nil {
		return 0, err
	}
	r.cl.add(pool.Close)
	objects, err := blob.New(config.S3{Endpoint: direct["S3_ENDPOINT"], AccessKey: s3AccessKey, SecretKey: s3SecretKey, Bucket: s3Bucket})
	if err != nil {
		return 0, err
	}
	obs := newObserver(rb.url())
	if err := obs.declare(); err != nil {
		return 0, err
	}
	// Background work lives until the end of the run; the cleanups stop it
	// before the stack goes.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var bgWG sync.WaitGroup
	r.cl.add(func() { stopBG(); bgWG.Wait() })
	bgWG.Go(func() { obs.run(bg, r.logf) })

	// The services, through the proxies.
	env := serviceEnv(proxied, filepath.Join(work, "tmp"))
	ps, err := newProcs(o.bin, filepath.Join(work, "logs"), env)
	if err != nil {
		return 0, err
	}
	redrives := newMetricSum("dubflow_reconciler_actions_total")
	recon := ps.byName("reconciler")
	recon.onStart = redrives.restarted
	in := &injector{rabbit: rb, pg: pg, minio: mn, px: px, procs: ps, logf: r.logf,
		kills: map[string]chan time.Duration{}, counts: map[string]int{}}
	if err := ps.startAll(); err != nil {
		return 0, err
	}
	supervise, stopSupervise := context.WithCancel(bg)
	var supWG sync.WaitGroup
	r.cl.add(func() {
		stopSupervise()
		supWG.Wait()
		ps.stopAll()
	})
	for _, p := range ps.list {
		ch := make(chan time.Duration)
		in.kills[p.name] = ch
		supWG.Go(func() { p.supervise(supervise, ch, r.logf) })
	}
	if err := waitUntil(ctx, 3*time.Minute, "services ready", ps.allReady); err != nil {
		return 0, fmt.Errorf("%w (logs in %s)", err, filepath.Join(work, "logs"))
	}
	r.logf("services ready: %s", strings.Join(services, ", "))
	bgWG.Go(func() {
		for bg.Err() == nil {
			redrives.scrape(bg, "http://"+recon.ops+"/metrics")
			sleepCtx(bg, 2*time.Second)
		}
	})
	bgWG.Go(func() { r.progress(bg, pool) })

	// Faults while the tasks are submitted and worked on.
	sub := &submitter{dubctl: filepath.Join(o.bin, "dubctl"), env: environ(direct)}
	faultCtx, stopFaults := context.WithTimeout(ctx, o.duration)
	defer stopFaults()
	var faultWG sync.WaitGroup
	faultWG.Go(func() { in.runFaults(faultCtx, r.rng(2)) })
	faultWG.Go(func() { in.runKills(faultCtx, r.rng(3)) })
	submitted := r.submitAll(ctx, sub, clips, o.duration/2)
	faultWG.Wait()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	r.logf("faults stopped: %s", counts(in.snapshot()))
	for _, b := range backends {
		if err := px.restore(b); err != nil {
			return 0, err
		}
	}
	if err := waitUntil(ctx, 3*time.Minute, "services ready after the faults", ps.allReady); err != nil {
		return 0, err
	}

	// Bounded wait for every task to end and the outbox to empty.
	r.logf("waiting up to %s for every task to end", o.settle)
	settled := waitUntil(ctx, o.settle, "every task ended", func() bool { return r.settled(ctx, pool, submitted) })
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if settled != nil {
		r.logf("%v; judging what there is", settled)
	}
	if err := obs.drained(ctx, 2*time.Minute); err != nil {
		r.logf("%v; counting the events received so far", err)
	}
	redrives.scrape(ctx, "http://"+recon.ops+"/metrics")

	s := &summary{Seed: o.seed, Requested: o.tasks, Submitted: submitted, Faults: in.snapshot(),
		RedriveMetric: redrives.byLabel("action"), SelfExits: map[string]int{}}
	for _, p := range ps.list {
		p.mu.Lock()
		if p.exits > 0 {
			s.SelfExits[p.name] = p.exits
		}
		p.mu.Unlock()
	}
	if err := collect(ctx, pool, objects, obs, filepath.Join(work, "outputs"), s); err != nil {
		return 0, err
	}
	if s.print(r.out) {
		return exitPass, nil
	}
	return exitFail, nil
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
				_, tries, err := sub.submit(ctx, picks[i])
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
	err := pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status NOT IN ('done', 'failed')),
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
