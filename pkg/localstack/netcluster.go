package localstack

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/uuid"
)

// NetCluster is a private RabbitMQ cluster whose nodes each run in a
// network namespace of their own, joined by a bridge in this one: a node's
// address is its namespace's, and Partition takes a node off the bridge —
// its peers and its clients stop hearing it, nothing is refused, as when a
// machine's network fails. It needs root (ip netns, a bridge) and
// Debian's rabbitmq-server. The nodes pause while they are the minority
// of a partition (cluster_partition_handling = pause_minority).
type NetCluster struct {
	*Cluster
	tag    string // names the bridge, the links and the namespaces
	subnet string // the bridge's /24, without its last number
}

// StartNetCluster makes a bridge and n namespaces, starts a node in each,
// joins them to the first and waits until the cluster has them all. Close
// stops the nodes and removes the namespaces and the bridge; when
// StartNetCluster fails, it has done so already.
func StartNetCluster(n int) (*NetCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("a cluster of %d nodes", n)
	}
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		return nil, fmt.Errorf("rabbitmq-server not found (install the Debian package rabbitmq-server): %w", err)
	}
	subnet, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	c := &NetCluster{Cluster: &Cluster{}, tag: strings.ReplaceAll(uuid.NewString()[:7], "-", ""), subnet: subnet}
	if err := c.start(n); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func (c *NetCluster) start(n int) error {
	br := c.bridge()
	if err := ipCmd("link", "add", br, "type", "bridge"); err != nil {
		return err
	}
	if err := ipCmd("addr", "add", c.subnet+".1/24", "dev", br); err != nil {
		return err
	}
	if err := ipCmd("link", "set", br, "up"); err != nil {
		return err
	}
	for i := range n {
		r, err := c.startNode(i)
		if err != nil {
			return err
		}
		c.nodes = append(c.nodes, r)
	}
	return c.join()
}

// startNode makes node i's namespace and link and starts the node in it.
func (c *NetCluster) startNode(i int) (*Rabbit, error) {
	ns, link, ip := c.ns(i), c.link(i), c.subnet+"."+strconv.Itoa(11+i)
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"link", "set", link, "master", c.bridge()},
		{"link", "set", link, "up"},
		{"-n", ns, "addr", "add", ip + "/24", "dev", "eth0"},
		{"-n", ns, "link", "set", "eth0", "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if err := ipCmd(args...); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("/tmp", "dubflow-rabbit-")
	if err != nil {
		return nil, fmt.Errorf("create rabbit data folder: %w", err)
	}
	r := &Rabbit{dir: dir, node: "rabbit@" + ip, host: ip, ns: ns, port: 5672, distPort: 25672}
	if err := r.prepare(); err != nil {
		return nil, errors.Join(fmt.Errorf("prepare rabbit in %s: %w", dir, err), r.Close())
	}
	if err := r.Start(); err != nil {
		return nil, errors.Join(err, r.Close())
	}
	return r, nil
}

// Partition takes node i off the bridge: packets to and from it are lost
// (no connection is refused or reset) until Heal.
func (c *NetCluster) Partition(i int) error { return ipCmd("link", "set", c.link(i), "down") }

// Heal puts node i back on the bridge.
func (c *NetCluster) Heal(i int) error { return ipCmd("link", "set", c.link(i), "up") }

// Close stops the nodes, ends what is left in their namespaces (epmd) and
// removes the namespaces, the links and the bridge.
func (c *NetCluster) Close() error {
	errs := []error{c.Cluster.Close()}
	for i := range c.nodes {
		_ = c.Heal(i)
	}
	for i := 0; ; i++ {
		ns := c.ns(i)
		if ipCmd("netns", "pids", ns) != nil {
			break // no such namespace: the last was made before
		}
		for _, pid := range nsPIDs(ns) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = ipCmd("link", "del", c.link(i))
		errs = append(errs, ipCmd("netns", "del", ns))
	}
	if ipCmd("link", "show", c.bridge()) == nil {
		errs = append(errs, ipCmd("link", "del", c.bridge()))
	}
	return errors.Join(errs...)
}

func (c *NetCluster) bridge() string    { return "dfb" + c.tag }
func (c *NetCluster) link(i int) string { return "dfv" + c.tag + strconv.Itoa(i) }
func (c *NetCluster) ns(i int) string   { return "dubflow-" + c.tag + "-" + strconv.Itoa(i) }

// nsPIDs lists the processes running in namespace ns.
func nsPIDs(ns string) []int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// freeSubnet picks a 10.250.N.0/24 that no route of this machine uses.
func freeSubnet() (string, error) {
	out, err := exec.Command("ip", "-4", "route", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip route: %w", err)
	}
	for n := 1; n < 255; n++ {
		s := "10.250." + strconv.Itoa(n)
		if !bytes.Contains(out, []byte(s+".")) {
			return s, nil
		}
	}
	return "", errors.New("no free 10.250.N.0/24 for the cluster's bridge")
}

// ipCmd runs ip with args.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
