package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/jackc/pgx/v5"
)

// haNodes are the sizes of the -ha stack: RabbitMQ nodes, PostgreSQL
// servers (a primary and a standby), MinIO processes (one erasure set).
const (
	haRabbitNodes = 3
	haPGNodes     = 2
	haMinioNodes  = 4
)

// haStack is the -ha form of the private stack: a RabbitMQ cluster whose
// nodes live in network namespaces of their own, a PostgreSQL cluster that
// Patroni fails over, a distributed MinIO.
type haStack struct {
	net   *localstack.NetCluster
	pg    *localstack.PGCluster
	minio *localstack.MinioSet

	mu sync.Mutex
	// minioKilled are the MinIO processes killed (and started again) during
	// the run, which the heal check reads from.
	minioKilled map[int]bool
}

// startHAStack starts the -ha stack and puts a proxy in front of each
// RabbitMQ node, each PostgreSQL server and the MinIO set.
func (r *runner) startHAStack(ctx context.Context, w *world) error {
	ha := &haStack{minioKilled: map[int]bool{}}
	w.ha = ha
	var err error
	r.logf("starting a %d-node RabbitMQ cluster in network namespaces, %d PostgreSQL servers under Patroni (%s), %d MinIO processes",
		haRabbitNodes, haPGNodes, replicationMode(r.o.async), haMinioNodes)
	if ha.net, err = localstack.StartNetCluster(haRabbitNodes); err != nil {
		return fmt.Errorf("private rabbitmq cluster: %w", err)
	}
	r.cl.add(func() { logErr(r.logf, "rabbitmq cluster", ha.net.Close()) })
	w.rb = &rabbit{nodes: ha.net.Nodes()}
	if ha.pg, err = localstack.StartPGCluster(ctx, localstack.PGOptions{Nodes: haPGNodes, Synchronous: !r.o.async}); err != nil {
		return fmt.Errorf("private postgres cluster: %w", err)
	}
	r.cl.add(func() { logErr(r.logf, "postgres cluster", ha.pg.Close()) })
	if ha.minio, err = localstack.StartMinioSet(ctx, r.o.minio, haMinioNodes); err != nil {
		return fmt.Errorf("private minio set: %w", err)
	}
	r.cl.add(func() { logErr(r.logf, "minio set", ha.minio.Close()) })
	r.logf("private HA stack: rabbitmq %s, postgres %s (primary: node %d), minio %s",
		ha.net.URL(), strings.Join(ha.pg.Addrs(), ","), ha.pg.Primary()+1, ha.minio.Endpoint())
	if err := createHADatabase(ctx, ha.pg); err != nil {
		return err
	}
	return r.proxyHA(w)
}

// proxyHA puts the proxies in front of the -ha stack and fills the
// direct and proxied environments.
func (r *runner) proxyHA(w *world) error {
	ha := w.ha
	w.px = newProxies()
	r.cl.add(w.px.close)
	var amqpURLs, pgAddrs []string
	for i := range w.rb.nodes {
		port, err := w.px.add("rabbitmq", rabbitProxy(i), w.rb.addr(i))
		if err != nil {
			return err
		}
		// A 5 s heartbeat: a client notices a node gone silent (a
		// partition) after three missed beats, 15 s, and fails over.
		amqpURLs = append(amqpURLs, fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/?heartbeat=5", port))
	}
	for i, addr := range ha.pg.Addrs() {
		port, err := w.px.add("postgres", fmt.Sprintf("postgres-%d", i+1), addr)
		if err != nil {
			return err
		}
		pgAddrs = append(pgAddrs, hostPort(port))
	}
	s3, err := w.px.add("minio", "minio", ha.minio.Endpoint())
	if err != nil {
		return err
	}
	w.direct = stackEnv(ha.net.URL(), ha.pg.URL("dubflow"), ha.minio.Endpoint())
	w.proxied = stackEnv(strings.Join(amqpURLs, ","), localstack.MultiHostURL(pgAddrs, "dubflow"), hostPort(s3))
	return nil
}

// createHADatabase creates the dubflow database on the cluster's primary.
func createHADatabase(ctx context.Context, pg *localstack.PGCluster) error {
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the private postgres cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE dubflow"); err != nil {
		return fmt.Errorf("create database dubflow: %w", err)
	}
	return nil
}

func replicationMode(async bool) string {
	if async {
		return "asynchronous standby"
	}
	return "synchronous standby"
}

func logErr(logf func(string, ...any), what string, err error) {
	if err != nil {
		logf("%s: %v", what, err)
	}
}

// haFaults are the -ha run's faults, each the loss of one server of an
// engine the others must carry on without.
func (in *injector) haFaults() []fault {
	return []fault{
		{"postgres_failover", in.pgFailover},
		{"minio_kill", in.minioKill},
		{"rabbitmq_kill", func(ctx context.Context, rng *rand.Rand) error { return in.restartNode(rng, true) }},
		{"rabbitmq_partition", in.netPartition},
	}
}

// failoverWait bounds how long a failover may take before the fault
// counts as failed (Patroni's: its leader key's 10 s and a loop).
const failoverWait = 2 * time.Minute

// pgFailover loses the primary's machine (Patroni and PostgreSQL
// SIGKILLed), waits until Patroni has promoted the standby, brings the
// lost node back after 5–20 s and waits until it streams again (the
// synchronous standby, when the cluster is synchronous), so that the next
// failover has a standby to promote.
func (in *injector) pgFailover(ctx context.Context, rng *rand.Rand) error {
	pg := in.ha.pg
	old := pg.Primary()
	if old < 0 {
		return fmt.Errorf("no primary before the fault")
	}
	in.faultAt("postgres_failover", fmt.Sprintf("primary node %d lost", old+1))
	if err := pg.KillNode(old); err != nil {
		return err
	}
	began := time.Now()
	now, err := pg.WaitPrimary(context.WithoutCancel(ctx), old, failoverWait)
	if err != nil {
		return err
	}
	in.logf("fault: node %d is the primary %s after the loss", now+1, time.Since(began).Round(100*time.Millisecond))
	sleepCtx(ctx, uniform(rng, 5*time.Second, 20*time.Second))
	if err := pg.StartNode(old); err != nil {
		return err
	}
	return pg.WaitReplicated(context.WithoutCancel(ctx), bootWait)
}

// minioKill SIGKILLs a MinIO process drawn at random and starts it again
// after 5–15 s; the set serves meanwhile (3 of 4 drives is its write
// quorum).
func (in *injector) minioKill(ctx context.Context, rng *rand.Rand) error {
	m := in.ha.minio
	i := rng.IntN(m.Nodes())
	in.faultAt("minio_kill", fmt.Sprintf("process %d (%s)", i+1, m.Addr(i)))
	m.Kill(i)
	in.ha.mu.Lock()
	in.ha.minioKilled[i] = true
	in.ha.mu.Unlock()
	sleepCtx(ctx, uniform(rng, 5*time.Second, 15*time.Second))
	if err := m.Start(i); err != nil {
		return err
	}
	return m.WaitLive(context.WithoutCancel(ctx), i, bootWait)
}

// netPartition takes a RabbitMQ node drawn at random off the network for
// partitionFor: its peers and the services stop hearing it (the node
// pauses when it notices it is the minority), then puts it back.
func (in *injector) netPartition(ctx context.Context, rng *rand.Rand) error {
	i := rng.IntN(len(in.rabbit.nodes))
	in.faultAt("rabbitmq_partition", fmt.Sprintf("node %d (%s) for %s", i+1, in.rabbit.addr(i), partitionFor))
	if err := in.ha.net.Partition(i); err != nil {
		return err
	}
	sleepCtx(ctx, partitionFor)
	return in.ha.net.Heal(i)
}
