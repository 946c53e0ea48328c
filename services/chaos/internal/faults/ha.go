package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dubflow/dubflow/services/chaos/internal/stack"
)

// haFaults are the -ha run's faults, each the loss of one server of an
// engine the others must carry on without.
func (in *Injector) haFaults() []fault {
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
func (in *Injector) pgFailover(ctx context.Context, rng *rand.Rand) error {
	pg := in.Ha.Pg
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
	in.Logf("fault: node %d is the primary %s after the loss", now+1, time.Since(began).Round(100*time.Millisecond))
	stack.SleepCtx(ctx, uniform(rng, 5*time.Second, 20*time.Second))
	if err := pg.StartNode(old); err != nil {
		return err
	}
	return pg.WaitReplicated(context.WithoutCancel(ctx), stack.BootWait)
}

// minioKill SIGKILLs a MinIO process drawn at random and starts it again
// after 5–15 s; the set serves meanwhile (3 of 4 drives is its write
// quorum).
func (in *Injector) minioKill(ctx context.Context, rng *rand.Rand) error {
	m := in.Ha.Minio
	i := rng.IntN(m.Nodes())
	in.faultAt("minio_kill", fmt.Sprintf("process %d (%s)", i+1, m.Addr(i)))
	m.Kill(i)
	in.Ha.MinioLost(i)
	stack.SleepCtx(ctx, uniform(rng, 5*time.Second, 15*time.Second))
	if err := m.Start(i); err != nil {
		return err
	}
	return m.WaitLive(context.WithoutCancel(ctx), i, stack.BootWait)
}

// netPartition takes a RabbitMQ node drawn at random off the network for
// partitionFor: its peers and the services stop hearing it (the node
// pauses when it notices it is the minority), then puts it back.
func (in *Injector) netPartition(ctx context.Context, rng *rand.Rand) error {
	i := rng.IntN(len(in.Rabbit.Nodes))
	in.faultAt("rabbitmq_partition", fmt.Sprintf("node %d (%s) for %s", i+1, in.Rabbit.Addr(i), partitionFor))
	if err := in.Ha.Net.Partition(i); err != nil {
		return err
	}
	stack.SleepCtx(ctx, partitionFor)
	return in.Ha.Net.Heal(i)
}
