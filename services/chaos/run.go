package main

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
	"github.com/jackc/pgx/v5/pgxpool"
)

// world is what a run set up: the private stack, its proxies, the services
// and the observers, and the background work that lives until the end.
type world struct {
	work    string
	clips   []clip
	rb      *rabbit
	pg      *postgres
	mn      *minioServer
	px      *proxies
	direct  map[string]string // the stack's addresses
	proxied map[string]string // the same through the proxies
	pool    *pgxpool.Pool
	objects *blob.Store
	obs     *observer

	bg   context.Context // background work: until the cleanups
	bgWG *sync.WaitGroup

	ha       *haStack // the -ha stack (nil otherwise)
	ps       *procs
	in       *injector
	redrives *metricSum
	recon    *proc
}

// run sets up the private stack and the services, injects the faults while
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
	r.cl.add(func() {
		if r.o.keep {
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
	if w.clips, err = makeClips(ctx, r.rng(1), r.o.fixtures, filepath.Join(w.work, "clips")); err != nil {
		return err
	}
	r.logf("made %d clips of real speech", len(w.clips))
	if r.o.ha {
		return r.startHAStack(ctx, w)
	}
	if w.rb, err = startRabbit(r.cl, r.logf, r.o.nodes()); err != nil {
		return err
	}
	if w.pg, err = startPostgres(ctx, w.work, r.cl); err != nil {
		return err
	}
	if w.mn, err = startMinio(ctx, r.o.minio, w.work, r.cl); err != nil {
		return err
	}
	r.logf("private stack: rabbitmq %s, postgres 127.0.0.1:%d, minio 127.0.0.1:%d", w.rb.url(), w.pg.port, w.mn.port)
	if err := createDatabase(ctx, w.pg); err != nil {
		return err
	}
	w.px = newProxies()
	r.cl.add(w.px.close)
	ports := map[string]int{}
	for name, upstream := range map[string]string{"postgres": hostPort(w.pg.port), "minio": hostPort(w.mn.port)} {
		if ports[name], err = w.px.add(name, name, upstream); err != nil {
			return err
		}
	}
	var amqpURLs []string
	for i := range w.rb.nodes {
		port, err := w.px.add("rabbitmq", rabbitProxy(i), w.rb.addr(i))
		if err != nil {
			return err
		}
		amqpURLs = append(amqpURLs, fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port))
	}
	w.direct = stackEnv(w.rb.url(), w.pg.url(w.pg.port), hostPort(w.mn.port))
	w.proxied = stackEnv(strings.Join(amqpURLs, ","), w.pg.url(ports["postgres"]), hostPort(ports["minio"]))
	return nil
}

// connect migrates the database, opens the judge's own connections
// (directly, not through the proxies) and starts the integrator's view of
// the events.
func (r *runner) connect(ctx context.Context, w *world) error {
	if out, err := r.command(ctx, filepath.Join(r.o.bin, "migrate"), w.direct).CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %w\n%s", err, out)
	}
	pool, err := store.Open(ctx, w.direct["DATABASE_URL"])
	if err != nil {
		return err
	}
	w.pool = pool
	r.cl.add(pool.Close)
	if w.objects, err = blob.New(config.S3{Endpoint: w.direct["S3_ENDPOINT"], AccessKey: s3AccessKey, SecretKey: s3SecretKey, Bucket: s3Bucket}); err != nil {
		return err
	}
	w.obs = newObserver(w.rb.url())
	if err := w.obs.declare(); err != nil {
		return err
	}
	// Background work lives until the end of the run; the cleanups stop it
	// before the stack goes.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	w.bg, w.bgWG = bg, &sync.WaitGroup{}
	r.cl.add(func() { stopBG(); w.bgWG.Wait() })
	w.bgWG.Go(func() { w.obs.run(bg, r.logf) })
	return nil
}

// startServices starts the services through the proxies, each under a
// supervisor that restarts it, and waits until they are ready.
func (r *runner) startServices(ctx context.Context, w *world) error {
	env := serviceEnv(w.proxied, filepath.Join(w.work, "tmp"))
	ps, err := newProcs(r.o.bin, filepath.Join(w.work, "logs"), env, r.o.ha)
	if err != nil {
		return err
	}
	w.ps = ps
	w.redrives = newMetricSum("dubflow_reconciler_actions_total")
	w.recon = ps.byName("reconciler")
	w.recon.onStart = w.redrives.restarted
	w.in = &injector{rabbit: w.rb, pg: w.pg, minio: w.mn, px: w.px, procs: ps, logf: r.logf, ha: w.ha,
		kills: map[string]chan time.Duration{}, counts: map[string]int{}}
	if err := ps.startAll(); err != nil {
		return err
	}
	supervise, stopSupervise := context.WithCancel(w.bg)
	var supWG sync.WaitGroup
	r.cl.add(func() {
		stopSupervise()
		supWG.Wait()
		ps.stopAll()
	})
	for _, p := range ps.list {
		ch := make(chan time.Duration)
		w.in.kills[p.name] = ch
		supWG.Go(func() { p.supervise(supervise, ch, r.logf) })
	}
	if err := waitUntil(ctx, 3*time.Minute, "services ready", ps.allReady); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(w.work, "logs"))
	}
	r.logf("services ready: %s", strings.Join(services, ", "))
	w.bgWG.Go(func() {
		for w.bg.Err() == nil {
			w.redrives.scrape(w.bg, "http://"+w.recon.ops+"/metrics")
			sleepCtx(w.bg, 2*time.Second)
		}
	})
	w.bgWG.Go(func() { r.progress(w.bg, w.pool) })
	return nil
}

// inject runs the faults and the kills for -duration while it submits the
// tasks, then restores every proxy and waits for the services; it returns
// how many tasks were submitted.
func (r *runner) inject(ctx context.Context, w *world) (int, error) {
	sub := &submitter{dubctl: filepath.Join(r.o.bin, "dubctl"), env: environ(w.direct), spread: r.o.ha}
	faultCtx, stopFaults := context.WithTimeout(ctx, r.o.duration)
	defer stopFaults()
	var faultWG sync.WaitGroup
	faultWG.Go(func() { w.in.runFaults(faultCtx, r.rng(2)) })
	faultWG.Go(func() { w.in.runKills(faultCtx, r.rng(3)) })
	submitted := r.submitAll(ctx, sub, w.clips, r.o.duration/2)
	faultWG.Wait()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	r.logf("faults stopped: %s", counts(w.in.snapshot()))
	for _, b := range backends {
		if err := w.px.restore(b); err != nil {
			return 0, err
		}
	}
	if err := waitUntil(ctx, 3*time.Minute, "services ready after the faults", w.ps.allReady); err != nil {
		return 0, err
	}
	return submitted, nil
}

// judge waits (bounded by -settle) for every task to end and the outbox to
// empty, collects the evidence and prints the verdict.
func (r *runner) judge(ctx context.Context, w *world, submitted int) (int, error) {
	r.logf("waiting up to %s for every task to end", r.o.settle)
	settled := waitUntil(ctx, r.o.settle, "every task ended", func() bool { return r.settled(ctx, w.pool, submitted) })
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if settled != nil {
		r.logf("%v; judging what there is", settled)
	}
	if err := w.obs.drained(ctx, 2*time.Minute); err != nil {
		r.logf("%v; counting the events received so far", err)
	}
	w.redrives.scrape(ctx, "http://"+w.recon.ops+"/metrics")

	s := &summary{Seed: r.o.seed, Requested: r.o.tasks, Submitted: submitted, Faults: w.in.snapshot(),
		RedriveMetric: w.redrives.byLabel("action"), SelfExits: map[string]int{}}
	for _, p := range w.ps.list {
		p.mu.Lock()
		if p.exits > 0 {
			s.SelfExits[p.name] = p.exits
		}
		p.mu.Unlock()
	}
	if err := collect(ctx, w.pool, w.objects, w.obs, filepath.Join(w.work, "outputs"), s); err != nil {
		return 0, err
	}
	if r.o.ha {
		if err := r.judgeHA(ctx, w, s); err != nil {
			return 0, err
		}
	}
	if s.print(r.out) {
		return exitPass, nil
	}
	return exitFail, nil
}

// judgeHA adds the -ha figures: each fault's pause and the MinIO heal
// checks.
func (r *runner) judgeHA(ctx context.Context, w *world, s *summary) error {
	s.HA, s.Start, s.MaxPause = true, r.start, r.o.maxPause
	var err error
	if s.Pauses, err = measurePauses(ctx, w.pool, w.in.faultLog()); err != nil {
		return err
	}
	outputs, err := doneOutputs(ctx, w.pool)
	if err != nil {
		return err
	}
	s.HealChecks = r.checkHealed(ctx, w, outputs)
	return nil
}
