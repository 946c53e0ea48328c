package run

import (
	"context"
	"fmt"
	"strings"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/dubflow/dubflow/services/chaos/internal/faults"
	"github.com/dubflow/dubflow/services/chaos/internal/stack"
)

// startHAStack starts the -ha stack and puts a proxy in front of each
// RabbitMQ node, each PostgreSQL server and the MinIO set.
func (r *runner) startHAStack(ctx context.Context, w *world) error {
	ha := stack.NewHAStack()
	w.ha = ha
	var err error
	r.logf("starting a %d-node RabbitMQ cluster in network namespaces, %d PostgreSQL servers under Patroni (%s), %d MinIO processes",
		stack.HARabbitNodes, stack.HAPGNodes, stack.ReplicationMode(r.o.Async), stack.HAMinioNodes)
	if ha.Net, err = localstack.StartNetCluster(stack.HARabbitNodes); err != nil {
		return fmt.Errorf("private rabbitmq cluster: %w", err)
	}
	r.cl.Add(func() { stack.LogErr(r.logf, "rabbitmq cluster", ha.Net.Close()) })
	w.rb = &stack.Rabbit{Nodes: ha.Net.Nodes()}
	if ha.Pg, err = localstack.StartPGCluster(ctx, localstack.PGOptions{Nodes: stack.HAPGNodes, Synchronous: !r.o.Async}); err != nil {
		return fmt.Errorf("private postgres cluster: %w", err)
	}
	r.cl.Add(func() { stack.LogErr(r.logf, "postgres cluster", ha.Pg.Close()) })
	if ha.Minio, err = localstack.StartMinioSet(ctx, r.o.Minio, stack.HAMinioNodes); err != nil {
		return fmt.Errorf("private minio set: %w", err)
	}
	r.cl.Add(func() { stack.LogErr(r.logf, "minio set", ha.Minio.Close()) })
	r.logf("private HA stack: rabbitmq %s, postgres %s (primary: node %d), minio %s",
		ha.Net.URL(), strings.Join(ha.Pg.Addrs(), ","), ha.Pg.Primary()+1, ha.Minio.Endpoint())
	if err := stack.CreateHADatabase(ctx, ha.Pg); err != nil {
		return err
	}
	return r.proxyHA(w)
}

// proxyHA puts the proxies in front of the -ha stack and fills the
// direct and proxied environments.
func (r *runner) proxyHA(w *world) error {
	ha := w.ha
	w.px = stack.NewProxies()
	r.cl.Add(w.px.Close)
	var amqpURLs, pgAddrs []string
	for i := range w.rb.Nodes {
		port, err := w.px.Add("rabbitmq", faults.RabbitProxy(i), w.rb.Addr(i))
		if err != nil {
			return err
		}
		// A 5 s heartbeat: a client notices a node gone silent (a
		// partition) after three missed beats, 15 s, and fails over.
		amqpURLs = append(amqpURLs, fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/?heartbeat=5", port))
	}
	for i, addr := range ha.Pg.Addrs() {
		port, err := w.px.Add("postgres", fmt.Sprintf("postgres-%d", i+1), addr)
		if err != nil {
			return err
		}
		pgAddrs = append(pgAddrs, stack.HostPort(port))
	}
	s3, err := w.px.Add("minio", "minio", ha.Minio.Endpoint())
	if err != nil {
		return err
	}
	w.direct = stackEnv(ha.Net.URL(), ha.Pg.URL("dubflow"), ha.Minio.Endpoint())
	w.proxied = stackEnv(strings.Join(amqpURLs, ","), localstack.MultiHostURL(pgAddrs, "dubflow"), stack.HostPort(s3))
	return nil
}
