package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/blob"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/services/chaos/internal/faults"
	"github.com/dubflow/dubflow/services/chaos/internal/observe"
	"github.com/dubflow/dubflow/services/chaos/internal/procs"
	"github.com/dubflow/dubflow/services/chaos/internal/report"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
	"github.com/dubflow/dubflow/services/chaos/internal/submit"
	"github.com/jackc/pgx/v5/pgxpool"
)

// world is what a run set up: the private stack, its proxies, the services
// and the observers, and the background work that lives until the end.
type world struct {
	work    string
	clips   []submit.Clip
	rb      *stack.Rabbit
	pg      *stack.Postgres
	mn      *stack.MinioServer
	px      *stack.Proxies
	direct  map[string]string // the stack's addresses
	proxied map[string]string // the same through the proxies
	pool    *pgxpool.Pool
	objects *blob.Store
	obs     *observe.Observer

	bg   context.Context // background work: until the cleanups
	bgWG *sync.WaitGroup

	ha       *stack.HAStack // the -ha stack (nil otherwise)
	ps       *procs.Procs
	in       *faults.Injector
	redrives *observe.MetricSum
	recon    *procs.Proc
}

// Run sets up the private stack and the services, injects the faults while
// it submits the tasks, waits for them to end and judges.
func (r *runner) run(ctx context.Context) (int, error) {
	w := &world{}
	if err := r.prepareWork(w); err != nil {
		return 0, err
	}
	if err := r.startStack(ctx, w); err != nil {
		return 0, err
	}
	if err := r.connect(ctx, w); err != nil {
		return 0, err
	}
	if err := r.startServices(ctx, w); err != nil {
		return 0, err
	}
	submitted, err := r.inject(ctx, w)
	if err != nil {
		return 0, err
	}
	return r.judge(ctx, w, submitted)
}

// prepareWork makes the run's work folder (removed at the end unless -keep).
func (r *runner) prepareWork(w *world) error {
	work, err := os.MkdirTemp("", "dubflow-chaos-")
	if err != nil {
		return err
	}
	w.work = work
	r.cl.Add(func() {
		if r.o.Keep {
			r.logf("kept the work folder %s (service logs in logs/)", work)
			return
		}
		if err := os.RemoveAll(work); err != nil {
			r.logf("remove %s: %v", work, err)
		}
	})
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	for _, d := range []string{"logs", "clips", "tmp", "outputs"} {
		if err := os.Mkdir(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}
	r.logf("work folder %s", work)
	return nil
}

// startStack makes the clips, starts the private RabbitMQ, Postgres and
// MinIO and puts a proxy in front of each.
func (r *runner) startStack(ctx context.Context, w *world) error {
	var err error
	if w.clips, err = submit.MakeClips(ctx, r.rng(1), r.o.Fixtures, filepath.Join(w.work, "clips")); err != nil {
		return err
	}
	r.logf("made %d clips of real speech", len(w.clips))
	if r.o.Ha {
		return r.startHAStack(ctx, w)
	}
	if w.rb, err = stack.StartRabbit(r.cl, r.logf, r.o.Nodes()); err != nil {
		return err
	}
	if w.pg, err = stack.StartPostgres(ctx, w.work, r.cl); err != nil {
		return err
	}
	if w.mn, err = stack.StartMinio(ctx, r.o.Minio, w.work, r.cl); err != nil {
		return err
	}
	r.logf("private stack: rabbitmq %s, postgres 127.0.0.1:%d, minio 127.0.0.1:%d", w.rb.URL(), w.pg.Port, w.mn.Port)
	if err := createDatabase(ctx, w.pg); err != nil {
		return err
	}
	w.px = stack.NewProxies()
	r.cl.Add(w.px.Close)
	ports := map[string]int{}
	for name, upstream := range map[string]string{"postgres": stack.HostPort(w.pg.Port), "minio": stack.HostPort(w.mn.Port)} {
		if ports[name], err = w.px.Add(name, name, upstream); err != nil {
			return err
		}
	}
	var amqpURLs []string
	for i := range w.rb.Nodes {
		port, err := w.px.Add("rabbitmq", faults.RabbitProxy(i), w.rb.Addr(i))
		if err != nil {
			return err
		}
		amqpURLs = append(amqpURLs, fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port))
	}
	w.direct = stackEnv(w.rb.URL(), w.pg.URL(w.pg.Port), stack.HostPort(w.mn.Port))
	w.proxied = stackEnv(strings.Join(amqpURLs, ","), w.pg.URL(ports["postgres"]), stack.HostPort(ports["minio"]))
	return nil
}

// connect migrates the database, opens the judge's own connections
// (directly, not through the proxies) and starts the integrator's view of
// the events.
func (r *runner) connect(ctx context.Context, w *world) error {
	if out, err := r.command(ctx, filepath.Join(r.o.Bin, "migrate"), w.direct).CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %w\n%s", err, out)
	}
	pool, err := store.Open(ctx, w.direct["DATABASE_URL"])
	if err != nil {
		return err
	}
	w.pool = pool
	r.cl.Add(pool.Close)
	if w.objects, err = blob.New(config.S3{Endpoint: w.direct["S3_ENDPOINT"], AccessKey: stack.S3AccessKey, SecretKey: stack.S3SecretKey, Bucket: stack.S3Bucket}); err != nil {
		return err
	}
	w.obs = observe.NewObserver(w.rb.URL())
	if err := w.obs.Declare(); err != nil {
		return err
	}
	// Background work lives until the end of the run; the cleanups stop it
	// before the stack goes.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	w.bg, w.bgWG = bg, &sync.WaitGroup{}
	r.cl.Add(func() { stopBG(); w.bgWG.Wait() })
	w.bgWG.Go(func() { w.obs.Run(bg, r.logf) })
	return nil
}

// startServices starts the services through the proxies, each under a
// supervisor that restarts it, and waits until they are ready.
func (r *runner) startServices(ctx context.Context, w *world) error {
	env := serviceEnv(w.proxied, filepath.Join(w.work, "tmp"))
	ps, err := procs.New(r.o.Bin, filepath.Join(w.work, "logs"), env, r.o.Ha)
	if err != nil {
		return err
	}
	w.ps = ps
	w.redrives = observe.NewMetricSum("dubflow_reconciler_actions_total")
	w.recon = ps.ByName("reconciler")
	w.recon.OnStart = w.redrives.Restarted
	w.in = &faults.Injector{Rabbit: w.rb, Pg: w.pg, Minio: w.mn, Px: w.px, Procs: ps, Logf: r.logf, Ha: w.ha,
		Kills: map[string]chan time.Duration{}, Counts: map[string]int{}}
	if err := ps.StartAll(); err != nil {
		return err
	}
	supervise, stopSupervise := context.WithCancel(w.bg)
	var supWG sync.WaitGroup
	r.cl.Add(func() {
		stopSupervise()
		supWG.Wait()
		ps.StopAll()
	})
	for _, p := range ps.List {
		ch := make(chan time.Duration)
		w.in.Kills[p.Name] = ch
		supWG.Go(func() { p.Supervise(supervise, ch, r.logf) })
	}
	if err := stack.WaitUntil(ctx, 3*time.Minute, "services ready", ps.AllReady); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(w.work, "logs"))
	}
	r.logf("services ready: %s", strings.Join(procs.Services, ", "))
	w.bgWG.Go(func() {
		for w.bg.Err() == nil {
			w.redrives.Scrape(w.bg, "http://"+w.recon.Ops+"/metrics")
			stack.SleepCtx(w.bg, 2*time.Second)
		}
	})
	w.bgWG.Go(func() { r.progress(w.bg, w.pool) })
	return nil
}

// inject runs the faults and the kills for -duration while it submits the
// tasks, then restores every proxy and waits for the services; it returns
// how many tasks were submitted.
func (r *runner) inject(ctx context.Context, w *world) (int, error) {
	sub := &submit.Submitter{Dubctl: filepath.Join(r.o.Bin, "dubctl"), Env: procs.Environ(w.direct), Spread: r.o.Ha}
	faultCtx, stopFaults := context.WithTimeout(ctx, r.o.Duration)
	defer stopFaults()
	var faultWG sync.WaitGroup
	faultWG.Go(func() { w.in.RunFaults(faultCtx, r.rng(2)) })
	faultWG.Go(func() { w.in.RunKills(faultCtx, r.rng(3)) })
	submitted := r.submitAll(ctx, sub, w.clips, r.o.Duration/2)
	faultWG.Wait()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	r.logf("faults stopped: %s", report.Counts(w.in.Snapshot()))
	for _, b := range faults.Backends {
		if err := w.px.Restore(b); err != nil {
			return 0, err
		}
	}
	if err := stack.WaitUntil(ctx, 3*time.Minute, "services ready after the faults", w.ps.AllReady); err != nil {
		return 0, err
	}
	return submitted, nil
}

// judge waits (bounded by -settle) for every task to end and the outbox to
// empty, collects the evidence and prints the verdict.
func (r *runner) judge(ctx context.Context, w *world, submitted int) (int, error) {
	r.logf("waiting up to %s for every task to end", r.o.Settle)
	settled := stack.WaitUntil(ctx, r.o.Settle, "every task ended", func() bool { return r.settled(ctx, w.pool, submitted) })
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if settled != nil {
		r.logf("%v; judging what there is", settled)
	}
	if err := w.obs.Drained(ctx, 2*time.Minute); err != nil {
		r.logf("%v; counting the events received so far", err)
	}
	w.redrives.Scrape(ctx, "http://"+w.recon.Ops+"/metrics")

	s := &report.Summary{Seed: r.o.Seed, Requested: r.o.Tasks, Submitted: submitted, Faults: w.in.Snapshot(),
		RedriveMetric: w.redrives.ByLabel("action"), SelfExits: map[string]int{}}
	for _, p := range w.ps.List {
		if n := p.SelfExits(); n > 0 {
			s.SelfExits[p.Name] = n
		}
	}
	if err := observe.Collect(ctx, w.pool, w.objects, w.obs, filepath.Join(w.work, "outputs"), s); err != nil {
		return 0, err
	}
	if r.o.Ha {
		if err := r.judgeHA(ctx, w, s); err != nil {
			return 0, err
		}
	}
	if s.Print(r.out) {
		return exitPass, nil
	}
	return exitFail, nil
}

// judgeHA adds the -ha figures: each fault's pause and the MinIO heal
// checks.
func (r *runner) judgeHA(ctx context.Context, w *world, s *report.Summary) error {
	s.HA, s.Start, s.MaxPause = true, r.start, r.o.MaxPause
	var err error
	if s.Pauses, err = measurePauses(ctx, w.pool, w.in.FaultLog()); err != nil {
		return err
	}
	outputs, err := doneOutputs(ctx, w.pool)
	if err != nil {
		return err
	}
	s.HealChecks = r.checkHealed(ctx, w, outputs)
	return nil
}
