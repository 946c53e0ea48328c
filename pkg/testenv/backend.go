package testenv

import (
	"context"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Backend is where tests find RabbitMQ, Postgres and MinIO.
type Backend int

const (
	// BackendStack is the stack scripts/stack.sh starts, or the servers
	// AMQP_URL, DATABASE_URL and S3_ENDPOINT name.
	BackendStack Backend = iota
	// BackendContainers is RabbitMQ, Postgres and MinIO started as
	// containers by testcontainers-go, once per test binary.
	BackendContainers
)

// backendVars are the variables that name the stack; any of them set means
// the caller chose the servers.
var backendVars = []string{"AMQP_URL", "DATABASE_URL", "S3_ENDPOINT"}

// ChooseBackend decides where the tests' servers come from: containers when
// none of AMQP_URL, DATABASE_URL and S3_ENDPOINT is set and a Docker engine
// answers (dockerReachable is asked only then), the local stack otherwise.
func ChooseBackend(getenv func(string) string, dockerReachable func() bool) Backend {
	for _, name := range backendVars {
		if getenv(name) != "" {
			return BackendStack
		}
	}
	if dockerReachable() {
		return BackendContainers
	}
	return BackendStack
}

// DockerReachable reports whether a Docker engine answers a ping at
// DOCKER_HOST (a unix:// or tcp:// address) or at /var/run/docker.sock.
func DockerReachable() bool {
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		scheme, rest, ok := strings.Cut(h, "://")
		if !ok {
			return false
		}
		switch scheme {
		case "unix":
			addr = rest
		case "tcp":
			network, addr = "tcp", rest
		default:
			return false
		}
	}
	client := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}},
	}
	resp, err := client.Get("http://docker/_ping")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
