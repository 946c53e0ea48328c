package testenv

import (
	"os"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// DefaultAMQPURL is the local stack's broker.
const DefaultAMQPURL = "amqp://guest:guest@localhost:5672/"

// AMQP returns the URL of a fresh virtual host on the broker of AMQP_URL,
// with the URL's user granted every permission on it. The virtual host is
// deleted when the test ends, with everything declared in it.
//
// The virtual host is created with rabbitmqctl, so the broker must be a node
// on this machine: the system node by default, or the node named by
// RABBITMQ_NODENAME (the variable rabbitmqctl itself reads, which
// scripts/stack.sh writes to .devstack/env when it starts a private node).
func AMQP(t testing.TB) string {
	t.Helper()
	base := Env("AMQP_URL", DefaultAMQPURL)
	uri, err := amqp.ParseURI(base)
	if err != nil {
		t.Fatalf("testenv: parse AMQP_URL: %v", err)
	}
	node := os.Getenv("RABBITMQ_NODENAME")
	vhost, err := freshVhost(t, node, uri.Username)
	if err != nil {
		t.Fatalf("testenv: create virtual host on the broker of %s (is the local stack up? run `scripts/stack.sh up --infra-only`; "+
			"for a node other than the machine's default, set RABBITMQ_NODENAME): %v", redactURL(uri), err)
	}
	uri.Vhost = vhost
	url := uri.String()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatalf("testenv: connect to new virtual host %s at %s:%d (rabbitmqctl created it on node %q; "+
			"is that the node serving AMQP_URL? set RABBITMQ_NODENAME): %v", vhost, uri.Host, uri.Port, nodeOrDefault(node), err)
	}
	_ = conn.Close()
	return url
}

// freshVhost makes a virtual host for one test, with user granted every
// permission on it, deleted when the test ends: from the batches of
// FreshVhost on a node of this machine, one by one in the container.
func freshVhost(t testing.TB, node, user string) (string, error) {
	if node == "" && containersUp != nil {
		vhost := "dubflow-test-" + strings.ReplaceAll(uuid.NewString()[:18], "-", "")
		if err := rabbitctl(node, "add_vhost", vhost); err != nil {
			return "", err
		}
		t.Cleanup(func() {
			if err := rabbitctl(node, "delete_vhost", vhost); err != nil {
				t.Logf("testenv: delete virtual host %s: %v", vhost, err)
			}
		})
		return vhost, rabbitctl(node, "set_permissions", "-p", vhost, user, ".*", ".*", ".*")
	}
	vhost, release, err := FreshVhost(node, user)
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { tidying.tidy(t, release) })
	return vhost, nil
}

// Rabbit is a private RabbitMQ node (localstack.Rabbit) for tests that
// stop, restart or kill the broker without disturbing anyone else. Its
// methods must be called from the test's goroutine, since they fail the
// test on error.
type Rabbit struct {
	t testing.TB
	r *localstack.Rabbit
}

// PrivateRabbit starts a private node (localstack.StartRabbit); it is
// stopped and its data removed when the test ends.
func PrivateRabbit(t testing.TB) *Rabbit {
	t.Helper()
	r, err := localstack.StartRabbit()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Logf("testenv: %v", err)
		}
	})
	return &Rabbit{t: t, r: r}
}

// URL returns the AMQP URL of the private node's default virtual host.
func (r *Rabbit) URL() string { return r.r.URL() }

// Node returns the node name, for rabbitmqctl -n.
func (r *Rabbit) Node() string { return r.r.Node() }

// Start starts the node and waits until it accepts AMQP connections.
func (r *Rabbit) Start() { r.t.Helper(); r.must(r.r.Start()) }

// Stop stops the node cleanly and waits until its process has exited.
func (r *Rabbit) Stop() { r.t.Helper(); r.must(r.r.Stop()) }

// Kill ends the node with SIGKILL, as a crash would, and waits until its
// process is gone.
func (r *Rabbit) Kill() { r.t.Helper(); r.must(r.r.Kill()) }

// Restart stops the node cleanly and starts it again on the same ports and
// data, so durable queues and messages survive.
func (r *Rabbit) Restart() { r.t.Helper(); r.must(r.r.Restart()) }

func (r *Rabbit) must(err error) {
	r.t.Helper()
	if err != nil {
		r.t.Fatalf("testenv: %v", err)
	}
}

// rabbitctl runs rabbitmqctl against node (the machine's default node when
// empty; on BackendContainers, the default node is the container's).
func rabbitctl(node string, args ...string) error {
	if node == "" && containersUp != nil {
		return containerRabbitctl(args...)
	}
	return localstack.Rabbitctl(node, args...)
}

func nodeOrDefault(node string) string {
	if node == "" {
		return "default"
	}
	return node
}

// redactURL prints an AMQP URI without its password.
func redactURL(uri amqp.URI) string {
	uri.Password = "xxx"
	return uri.String()
}

// Policy sets the RabbitMQ policy name (definition: JSON, such as
// {"max-length": 1}) on the queues matching pattern in the virtual host of
// url, a URL AMQP returned, with rabbitmqctl, as an operator would; it goes
// with the virtual host when the test ends.
func Policy(t testing.TB, url, name, pattern, definition string) {
	t.Helper()
	uri, err := amqp.ParseURI(url)
	if err != nil {
		t.Fatalf("testenv: parse %s: %v", redactURL(uri), err)
	}
	if err := rabbitctl(os.Getenv("RABBITMQ_NODENAME"), "set_policy", "-p", uri.Vhost, "--apply-to", "queues",
		name, pattern, definition); err != nil {
		t.Fatalf("testenv: set policy %s on %s: %v", name, uri.Vhost, err)
	}
}
