package localstack

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Cluster is a private RabbitMQ cluster: private nodes (StartRabbit) joined
// to the first, for callers that kill or cut one node while the others
// carry on.
type Cluster struct {
	nodes []*Rabbit
}

// StartCluster starts n private nodes and joins the others to the first,
// so that a quorum queue declared afterwards has a member on every node.
// The nodes share the rabbitmq user's Erlang cookie. Close stops every
// node and removes its data; when StartCluster fails, it has done so
// already.
func StartCluster(n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("a cluster of %d nodes", n)
	}
	c := &Cluster{}
	for range n {
		r, err := StartRabbit()
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.nodes = append(c.nodes, r)
	}
	if err := c.join(); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// join joins every node but the first to the first and waits until the
// cluster has them all.
func (c *Cluster) join() error {
	first := c.nodes[0].node
	for _, r := range c.nodes[1:] {
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", first}, {"start_app"}} {
			if err := Rabbitctl(r.node, args...); err != nil {
				return fmt.Errorf("join %s to %s: %w", r.node, first, err)
			}
		}
	}
	wait := strconv.Itoa(int(NodeStartTimeout.Seconds()))
	if err := Rabbitctl(first, "await_online_nodes", strconv.Itoa(len(c.nodes)), "--timeout", wait); err != nil {
		return fmt.Errorf("wait for the %d nodes of the cluster: %w", len(c.nodes), err)
	}
	return nil
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

// Close stops every node and removes its data.
func (c *Cluster) Close() error {
	var errs []error
	for _, r := range c.nodes {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
