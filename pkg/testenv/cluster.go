package testenv

import (
	"strconv"
	"strings"
	"testing"
)

// Cluster is a private RabbitMQ cluster: PrivateRabbit nodes joined to the
// first, for tests that kill or cut one node while the others carry on.
// Its methods must be called from the test's goroutine.
type Cluster struct {
	t     testing.TB
	nodes []*Rabbit
}

// PrivateCluster starts n private nodes (PrivateRabbit) and joins the
// others to the first, so that a quorum queue declared afterwards has a
// member on every node. The nodes share the rabbitmq user's Erlang cookie.
// Every node is stopped and its data removed when the test ends.
func PrivateCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: a cluster of %d nodes", n)
	}
	c := &Cluster{t: t}
	for range n {
		c.nodes = append(c.nodes, PrivateRabbit(t))
	}
	first := c.nodes[0].node
	for _, r := range c.nodes[1:] {
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", first}, {"start_app"}} {
			if err := rabbitctl(r.node, args...); err != nil {
				t.Fatalf("testenv: join %s to %s: %v", r.node, first, err)
			}
		}
	}
	if err := rabbitctl(first, "await_online_nodes", strconv.Itoa(n), "--timeout", strconv.Itoa(int(nodeStartTimeout.Seconds()))); err != nil {
		t.Fatalf("testenv: wait for the %d nodes of the cluster: %v", n, err)
	}
	return c
}

// Nodes returns the cluster's nodes, the first being the one the others
// joined.
func (c *Cluster) Nodes() []*Rabbit { return c.nodes }

// URL returns the AMQP URLs of every node, separated by commas, as
// broker.Dial and AMQP_URL take a cluster.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i, r := range c.nodes {
		urls[i] = r.URL()
	}
	return strings.Join(urls, ",")
}
