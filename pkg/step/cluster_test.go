package step_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// clusterEnv names the comma-separated AMQP URLs of a private 3-node
// cluster that the test may kill nodes of; `make cluster-test` starts one
// with scripts/cluster.sh and sets it.
const clusterEnv = "DUBFLOW_CLUSTER_URL"

// TestClusterNodeKilledMidBatchLosesAndDuplicatesNothing runs a two-step
// chain (extract_audio, then asr, which ends the task) over a 3-node
// RabbitMQ cluster whose work queues are quorum queues replicated on every
// node, SIGKILLs the node the workers are connected to while a batch of
// tasks is half done, and shows that the workers fail over to another node
// and every task ends done with no duplicate effect: one succeeded attempt
// per step, one effect per step, and one task.succeeded event per task
// once deduplicated by event_id.
func TestClusterNodeKilledMidBatchLosesAndDuplicatesNothing(t *testing.T) {
	url := os.Getenv(clusterEnv)
	if url == "" {
		t.Skipf("%s is not set: run `make cluster-test`, which starts a private 3-node cluster (scripts/cluster.sh)", clusterEnv)
	}
	const tasks = 300
	url = clusterVhost(t, url)
	h := setupOn(t, url)
	requireQuorumOnEveryNode(t, url, []string{wire.QueueExtractAudio, wire.QueueASR})
	events := declareQuorumEventQueue(t, h)
	cons := dialCluster(t, h, url)
	on := func(queue string) options {
		return func(c *step.Config) {
			c.Source = step.BrokerSource(cons, broker.ConsumeOptions{Queue: queue, Prefetch: 8, Concurrency: 8})
		}
	}
	h.run(wire.QueueExtractAudio, []step.Route{{Step: wire.StepExtractAudio, Timeout: 30 * time.Second,
		Handler: clusterStep(func(msg *step.Message) error {
			keys := wire.DefaultKeys(msg.Envelope.TaskID)
			return msg.Emit(wire.StepASR, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
		})}}, on(wire.QueueExtractAudio))
	h.run(wire.QueueASR, []step.Route{{Step: wire.StepASR, After: wire.StepExtractAudio, Timeout: 30 * time.Second,
		Handler: clusterStep(func(msg *step.Message) error {
			msg.Apply(task.Succeed(task.RefOf(msg.Envelope), nil, ""))
			return nil
		})}}, on(wire.QueueASR))

	var published atomic.Int64
	publishing := make(chan error, 1)
	go func() { publishing <- publishTasks(h, tasks, &published) }()
	// The kill lands while tasks are still being published and run.
	testenv.EventuallyWithin(t, 120*time.Second, "a sixth of the batch", func() bool { return countEffects(h) >= tasks/3 })
	addr := cons.Addr()
	if addr == "" || addr != h.conn.Addr() {
		t.Fatalf("workers on %q, publisher on %q: want both on one live node", addr, h.conn.Addr())
	}
	killNode(t, addr)
	t.Logf("killed the node at %s with %d of %d tasks published and %d of %d effects done",
		addr, published.Load(), tasks, countEffects(h), 2*tasks)
	testenv.EventuallyWithin(t, 60*time.Second, "the workers to fail over to another node", func() bool {
		a := cons.Addr()
		return a != "" && a != addr && cons.Consuming()
	})
	t.Logf("workers failed over to %s, publisher to %s", cons.Addr(), h.conn.Addr())
	if err := <-publishing; err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 180*time.Second, "every task to be done", func() bool { return countTasks(h, task.Done) == tasks })
	testenv.EventuallyWithin(t, 60*time.Second, "the outbox to be empty", func() bool { return countRows(h, `SELECT count(*) FROM outbox`) == 0 })
	checkOnceEach(t, h, tasks)
	checkSucceededEventsOnce(t, h, events, tasks)
}

// TestClusterLeaderNodeKilledWithUnackedDeliveriesLosesAndDuplicatesNothing
// kills the node that holds the leader of the first step's quorum queue
// while the workers, connected to that very node, hold deliveries they
// have not acked (their handlers are held mid-step), then lets the handlers
// finish: their acks die with the node, a new leader is elected among the
// other two, the workers fail over and the broker delivers those messages
// again. Every task still ends done with one succeeded attempt and one
// effect per step and one task.succeeded event.
func TestClusterLeaderNodeKilledWithUnackedDeliveriesLosesAndDuplicatesNothing(t *testing.T) {
	url := os.Getenv(clusterEnv)
	if url == "" {
		t.Skipf("%s is not set: run `make cluster-test`, which starts a private 3-node cluster (scripts/cluster.sh)", clusterEnv)
	}
	const tasks = 200
	url = clusterVhost(t, url)
	h := setupOn(t, url)
	requireQuorumOnEveryNode(t, url, []string{wire.QueueExtractAudio, wire.QueueASR})
	events := declareQuorumEventQueue(t, h)
	leaders := queueLeaders(t, url)
	leader := leaders[wire.QueueExtractAudio]
	t.Logf("queue leaders: %v", leaders)

	// The workers connect to the leader's node first.
	urls := strings.Split(url, ",")
	addrs := clusterAddrs(t, url)
	var first []string
	var leaderAddr string
	for i, n := range clusterNodes {
		if n == leader {
			leaderAddr = addrs[i]
			first = append([]string{urls[i]}, first...)
		} else {
			first = append(first, urls[i])
		}
	}
	if leaderAddr == "" {
		t.Fatalf("leader %q of %s is none of %v", leader, wire.QueueExtractAudio, clusterNodes)
	}
	cons := dialCluster(t, h, strings.Join(first, ","))
	testenv.EventuallyWithin(t, 30*time.Second, "the workers' connection", func() bool { return cons.Addr() != "" })
	if cons.Addr() != leaderAddr {
		t.Fatalf("workers on %s, want the leader's node %s", cons.Addr(), leaderAddr)
	}

	// While hold is set, extract_audio handlers wait for release after
	// counting themselves in held: their deliveries stay unacked.
	var hold atomic.Bool
	var held atomic.Int64
	release := make(chan struct{})
	on := func(queue string) options {
		return func(c *step.Config) {
			c.Source = step.BrokerSource(cons, broker.ConsumeOptions{Queue: queue, Prefetch: 8, Concurrency: 8})
		}
	}
	h.run(wire.QueueExtractAudio, []step.Route{{Step: wire.StepExtractAudio, Timeout: 60 * time.Second,
		Handler: clusterStep(func(msg *step.Message) error {
			if hold.Load() {
				held.Add(1)
				<-release
			}
			keys := wire.DefaultKeys(msg.Envelope.TaskID)
			return msg.Emit(wire.StepASR, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
		})}}, on(wire.QueueExtractAudio))
	h.run(wire.QueueASR, []step.Route{{Step: wire.StepASR, After: wire.StepExtractAudio, Timeout: 30 * time.Second,
		Handler: clusterStep(func(msg *step.Message) error {
			msg.Apply(task.Succeed(task.RefOf(msg.Envelope), nil, ""))
			return nil
		})}}, on(wire.QueueASR))

	var published atomic.Int64
	publishing := make(chan error, 1)
	go func() { publishing <- publishTasks(h, tasks, &published) }()
	testenv.EventuallyWithin(t, 120*time.Second, "a sixth of the batch", func() bool { return countEffects(h) >= tasks/3 })
	hold.Store(true)
	testenv.EventuallyWithin(t, 60*time.Second, "extract_audio handlers holding unacked deliveries", func() bool { return held.Load() >= 4 })
	if cons.Addr() != leaderAddr {
		t.Fatalf("workers moved to %s before the kill, want them on the leader's node %s", cons.Addr(), leaderAddr)
	}
	killNode(t, leaderAddr)
	t.Logf("killed the leaders' node %s (%s) with %d deliveries held unacked, %d of %d tasks published, %d of %d effects done",
		leader, leaderAddr, held.Load(), published.Load(), tasks, countEffects(h), 2*tasks)
	hold.Store(false)
	close(release)
	testenv.EventuallyWithin(t, 60*time.Second, "the workers to fail over to another node", func() bool {
		a := cons.Addr()
		return a != "" && a != leaderAddr && cons.Consuming()
	})
	t.Logf("workers failed over to %s, publisher on %s; new leaders: %v", cons.Addr(), h.conn.Addr(), queueLeaders(t, url))
	if err := <-publishing; err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyWithin(t, 180*time.Second, "every task to be done", func() bool { return countTasks(h, task.Done) == tasks })
	testenv.EventuallyWithin(t, 60*time.Second, "the outbox to be empty", func() bool { return countRows(h, `SELECT count(*) FROM outbox`) == 0 })
	checkOnceEach(t, h, tasks)
	checkSucceededEventsOnce(t, h, events, tasks)
}

// queueLeaders returns the node holding the leader of each quorum queue of
// the virtual host of url.
func queueLeaders(t *testing.T, url string) map[string]string {
	t.Helper()
	out := clusterCtl(t, "list_queues", "-p", vhostOf(t, url), "name", "leader", "--no-table-headers")
	leaders := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			leaders[f[0]] = f[1]
		}
	}
	return leaders
}

// publishTasks creates tasks task rows and publishes their first message,
// each confirmed, counting them in published.
func publishTasks(h *harness, tasks int, published *atomic.Int64) error {
	for range tasks {
		id := uuid.New()
		keys := wire.DefaultKeys(id)
		env, err := wire.New(wire.StepExtractAudio, id, "", wire.ExtractAudio{SourceVideoKey: keys.SourceVideo, OutputAudioKey: keys.SourceAudio})
		if err != nil {
			return err
		}
		if _, err := h.db.Pool.Exec(context.Background(), `INSERT INTO tasks (id, status, trace_id) VALUES ($1, 'queued', $2)`,
			id, env.TraceID); err != nil {
			return err
		}
		body, err := env.Marshal()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = h.pub.Publish(ctx, wire.Exchange, wire.QueueExtractAudio, amqpPublishing(body))
		cancel()
		if err != nil {
			return fmt.Errorf("publish task %d: %w", published.Load()+1, err)
		}
		published.Add(1)
	}
	return nil
}

// clusterStep records the step's effect, takes a few milliseconds as real
// work would (so that the kill lands in the middle of the batch) and stages
// what next does.
func clusterStep(next func(*step.Message) error) step.Handler {
	return step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		msg.Exec(`INSERT INTO effects (task_id, step, part) VALUES ($1, $2, $3)`, msg.Envelope.TaskID, msg.Envelope.Step, msg.Part)
		return next(msg)
	})
}

// dialCluster dials the workers' consuming connection to the cluster.
func dialCluster(t *testing.T, h *harness, url string) *broker.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, url, "cluster-consume", h.log, broker.WithBackoff(50*time.Millisecond, time.Second))
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// declareQuorumEventQueue binds a quorum queue to every event, as an
// integrator on a cluster would: a classic queue lives on one node and dies
// with it.
func declareQuorumEventQueue(t *testing.T, h *harness) string {
	t.Helper()
	ch := h.channel()
	defer ch.Close()
	name := "cluster-events-" + uuid.NewString()[:8]
	if _, err := ch.QueueDeclare(name, true, false, false, false, amqp.Table{"x-queue-type": "quorum"}); err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
	if err := ch.QueueBind(name, wire.EventPrefix+"#", wire.Exchange, false, nil); err != nil {
		t.Fatalf("bind %s: %v", name, err)
	}
	return name
}

// clusterNodes are the node names scripts/cluster.sh gives.
var clusterNodes = []string{"dubflow-cluster-1@localhost", "dubflow-cluster-2@localhost", "dubflow-cluster-3@localhost"}

// requireQuorumOnEveryNode checks that each queue of the virtual host of
// url is a quorum queue with a member on every node of the cluster.
func requireQuorumOnEveryNode(t *testing.T, url string, queues []string) {
	t.Helper()
	out := clusterCtl(t, "list_queues", "-p", vhostOf(t, url), "name", "type", "members", "--no-table-headers")
	for _, q := range queues {
		var line string
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == q {
				line = l
			}
		}
		if !strings.Contains(line, "quorum") {
			t.Fatalf("queue %s is not a quorum queue: %q", q, line)
		}
		for _, n := range clusterNodes {
			if !strings.Contains(line, n) {
				t.Fatalf("queue %s has no member on %s: %q", q, n, line)
			}
		}
	}
}

// clusterUp starts again every node of the cluster of url that is down (a
// test before killed it) and waits until all of them run, so that each
// scenario begins with the whole cluster.
func clusterUp(t *testing.T, url string) {
	t.Helper()
	script, err := filepath.Abs("../../scripts/cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range clusterAddrs(t, url) {
		if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			c.Close()
			continue
		}
		_, port, _ := net.SplitHostPort(addr)
		if out, err := exec.Command(script, "start", port).CombinedOutput(); err != nil {
			t.Fatalf("start the node on port %s again: %v: %s", port, err, out)
		}
		t.Logf("started the node at %s again", addr)
	}
	clusterCtl(t, "await_online_nodes", strconv.Itoa(len(clusterNodes)), "--timeout", "300")
}

// clusterVhost brings the whole cluster up (clusterUp), creates a virtual
// host of the test's own on it and returns url with every node's URL naming
// that virtual host, so that a scenario finds no queue or message of
// another; the virtual host is deleted when the test ends.
func clusterVhost(t *testing.T, url string) string {
	t.Helper()
	clusterUp(t, url)
	vhost := "cluster-" + uuid.NewString()[:8]
	clusterCtl(t, "add_vhost", vhost)
	t.Cleanup(func() {
		if _, err := clusterCtlErr("delete_vhost", vhost); err != nil {
			t.Logf("delete virtual host %s: %v", vhost, err)
		}
	})
	urls := strings.Split(url, ",")
	for i, u := range urls {
		uri, err := amqp.ParseURI(u)
		if err != nil {
			t.Fatal(err)
		}
		clusterCtl(t, "set_permissions", "-p", vhost, uri.Username, ".*", ".*", ".*")
		uri.Vhost = vhost
		urls[i] = uri.String()
	}
	return strings.Join(urls, ",")
}

// vhostOf is the virtual host the first URL of url names.
func vhostOf(t *testing.T, url string) string {
	t.Helper()
	uri, err := amqp.ParseURI(strings.Split(url, ",")[0])
	if err != nil {
		t.Fatal(err)
	}
	return uri.Vhost
}

// clusterAddrs are the host:port of each node of url, in the order of
// clusterNodes (scripts/cluster.sh lists them so).
func clusterAddrs(t *testing.T, url string) []string {
	t.Helper()
	var addrs []string
	for _, u := range strings.Split(url, ",") {
		uri, err := amqp.ParseURI(u)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)))
	}
	if len(addrs) != len(clusterNodes) {
		t.Fatalf("%s names %d nodes, want %d", clusterEnv, len(addrs), len(clusterNodes))
	}
	return addrs
}

// clusterCtl runs rabbitmqctl with args on the first node that answers and
// returns its output.
func clusterCtl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := clusterCtlErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func clusterCtlErr(args ...string) (string, error) {
	var errs []error
	for _, n := range clusterNodes {
		out, err := exec.Command("rabbitmqctl", append([]string{"-q", "-n", n}, args...)...).CombinedOutput()
		if err == nil {
			return string(out), nil
		}
		errs = append(errs, fmt.Errorf("rabbitmqctl -n %s %s: %w: %s", n, strings.Join(args, " "), err, out))
	}
	return "", errors.Join(errs...)
}

// killNode SIGKILLs the cluster node serving AMQP at addr.
func killNode(t *testing.T, addr string) {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../scripts/cluster.sh")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(script, "kill", port).CombinedOutput(); err != nil {
		t.Fatalf("kill node on port %s: %v: %s", port, err, out)
	}
}

func countTasks(h *harness, status string) int {
	return countRows(h, `SELECT count(*) FROM tasks WHERE status = '`+status+`'`)
}

func countRows(h *harness, query string) int {
	var n int
	if err := h.db.Pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

// checkOnceEach checks one succeeded attempt and one effect per step and
// task.
func checkOnceEach(t *testing.T, h *harness, tasks int) {
	t.Helper()
	if n := countRows(h, `SELECT count(*) FROM (SELECT 1 FROM task_steps WHERE status = 'succeeded'
		GROUP BY task_id, step, part HAVING count(*) > 1) d`); n != 0 {
		t.Errorf("%d parts succeeded more than once", n)
	}
	if n := countRows(h, `SELECT count(*) FROM task_steps WHERE status = 'succeeded'`); n != 2*tasks {
		t.Errorf("%d succeeded attempts, want %d (two steps per task)", n, 2*tasks)
	}
	all := countRows(h, `SELECT count(*) FROM effects`)
	distinct := countRows(h, `SELECT count(*) FROM (SELECT DISTINCT task_id, step FROM effects) d`)
	if all != 2*tasks || distinct != 2*tasks {
		t.Errorf("effects: %d rows, %d distinct (task, step); want %d of each (none lost, none twice)", all, distinct, 2*tasks)
	}
}

// checkSucceededEventsOnce reads every event and checks that each task was
// announced succeeded under exactly one event_id (a redelivered copy of
// the same event_id is at-least-once delivery, not a second effect).
func checkSucceededEventsOnce(t *testing.T, h *harness, queue string, tasks int) {
	t.Helper()
	ch := h.channel()
	defer ch.Close()
	ids := map[uuid.UUID]map[uuid.UUID]bool{} // task → event ids of its task.succeeded
	copies := 0
	// take reads what the queue holds now and reports whether every task
	// has been announced.
	take := func() bool {
		for {
			d, ok, err := ch.Get(queue, true)
			if err != nil {
				t.Fatalf("get %s: %v", queue, err)
			}
			if !ok {
				return len(ids) == tasks
			}
			ev, err := wire.DecodeEvent(d.Body)
			if err != nil {
				t.Fatalf("event: %v", err)
			}
			if ev.Event != wire.EventTaskSucceeded {
				continue
			}
			if ids[ev.TaskID] == nil {
				ids[ev.TaskID] = map[uuid.UUID]bool{}
			}
			if ids[ev.TaskID][ev.EventID] {
				copies++
			}
			ids[ev.TaskID][ev.EventID] = true
		}
	}
	testenv.Poll(time.Now().Add(60*time.Second), take)
	var twice []string
	for id, evs := range ids {
		if len(evs) != 1 {
			twice = append(twice, fmt.Sprintf("%s: %d event ids", id, len(evs)))
		}
	}
	if len(ids) != tasks || len(twice) > 0 {
		t.Fatalf("task.succeeded for %d of %d tasks; announced more than once: %v", len(ids), tasks, twice)
	}
	t.Logf("every task announced succeeded once (%d redelivered copies of the same event_id)", copies)
}
