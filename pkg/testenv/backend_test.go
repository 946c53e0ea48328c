package testenv

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"
)

func TestChooseBackend(t *testing.T) {
	cases := []struct {
		name   string
		env    map[string]string
		docker bool
		want   Backend
		asked  bool // whether the Docker probe may be asked
	}{
		{"no URLs, Docker answers", nil, true, BackendContainers, true},
		{"no URLs, no Docker", nil, false, BackendStack, true},
		{"AMQP_URL given", map[string]string{"AMQP_URL": "amqp://guest:guest@localhost:5672/"}, true, BackendStack, false},
		{"DATABASE_URL given", map[string]string{"DATABASE_URL": "postgres://postgres@localhost/dubflow"}, true, BackendStack, false},
		{"S3_ENDPOINT given", map[string]string{"S3_ENDPOINT": "localhost:9000"}, true, BackendStack, false},
		{"empty values count as unset", map[string]string{"AMQP_URL": "", "S3_ENDPOINT": ""}, true, BackendContainers, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked := false
			got := ChooseBackend(func(k string) string { return c.env[k] }, func() bool { asked = true; return c.docker })
			if got != c.want {
				t.Errorf("backend = %v, want %v", got, c.want)
			}
			if asked && !c.asked {
				t.Error("Docker probed although the URLs were given")
			}
		})
	}
}

// TestDockerReachable probes a fake engine on a unix socket, and a socket
// where nothing answers.
func TestDockerReachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("OK"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	t.Setenv("DOCKER_HOST", "unix://"+sock)
	if !DockerReachable() {
		t.Error("fake engine not reachable")
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	if DockerReachable() {
		t.Error("reachable with nothing listening")
	}
	t.Setenv("DOCKER_HOST", "ssh://somewhere")
	if DockerReachable() {
		t.Error("reachable through an unsupported scheme")
	}
}
