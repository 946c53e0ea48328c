package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/testenv"
)

// get fetches url without a token and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOpsEndpointsAreOffThePublicPort: the public API port answers a bare
// /healthz and nothing else without the token; /readyz and /metrics are
// served on OPS_ADDR only.
func TestOpsEndpointsAreOffThePublicPort(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	d := startInProcess(t, testEnv(t, db.URL, testenv.AMQP(t), nil))
	if code, body := get(t, d.base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Errorf("public /healthz = %d %q, want 200 ok", code, body)
	}
	for _, path := range []string{"/readyz", "/metrics"} {
		if code, body := get(t, d.base+path); code != http.StatusUnauthorized || strings.Contains(body, "dispatcher_") {
			t.Errorf("public %s without a token = %d, want 401 and nothing of the ops endpoint", path, code)
		}
	}
	if code, _ := get(t, d.ops+"/healthz"); code != 200 {
		t.Errorf("ops /healthz = %d", code)
	}
	if code, body := get(t, d.ops+"/readyz"); code != 200 || !strings.Contains(body, "ready") {
		t.Errorf("ops /readyz = %d %q", code, body)
	}
	if code, body := get(t, d.ops+"/metrics"); code != 200 || !strings.Contains(body, "dispatcher_scans_total") {
		t.Errorf("ops /metrics = %d, want the dispatcher's metrics", code)
	}
}

func TestConfigRefusesOpsOnThePublicPort(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DISPATCHER_API_TOKEN": testToken, "DATABASE_URL": "postgres://x/y",
		"AMQP_URL": "amqp://x/", "DISPATCHER_HTTP_ADDR": ":8090", "OPS_ADDR": ":8090"}
	if _, err := loadConfig(env); err == nil || !strings.Contains(err.Error(), "OPS_ADDR") {
		t.Fatalf("loadConfig with OPS_ADDR = DISPATCHER_HTTP_ADDR: %v, want an OPS_ADDR error", err)
	}
	env["OPS_ADDR"] = ":8081"
	if _, err := loadConfig(env); err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
}

// TestDefaultAddressIsLoopback: without DISPATCHER_HTTP_ADDR the API
// listens on the loopback interface only (as the console does); the
// deployments set the pod's address themselves (deploy/manifests_test.go).
func TestDefaultAddressIsLoopback(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DISPATCHER_API_TOKEN": testToken, "DATABASE_URL": "postgres://x/y", "AMQP_URL": "amqp://x/"}
	cfg, err := loadConfig(env)
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	host, port, err := net.SplitHostPort(cfg.HTTPAddr)
	if err != nil || port != "8090" {
		t.Fatalf("default DISPATCHER_HTTP_ADDR %q, want port 8090", cfg.HTTPAddr)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Fatalf("default DISPATCHER_HTTP_ADDR %q listens beyond loopback", cfg.HTTPAddr)
	}
}

// TestListenersAreNamedInTheLog: the API's listener logs as the API
// server, the ops port's as ops, each with its own address.
func TestListenersAreNamedInTheLog(t *testing.T) {
	t.Parallel()
	db := testenv.Postgres(t)
	env := testEnv(t, db.URL, testenv.AMQP(t), map[string]string{"LOG_LEVEL": "info", "LOG_FORMAT": "json"})
	d := startProcess(t, buildBinary(t), env)
	found := map[string]string{}
	for _, line := range strings.Split(d.log.String(), "\n") {
		var l struct {
			Message, Server, Addr string
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "listening" {
			found[l.Server] = l.Addr
		}
	}
	if found["api"] != env["DISPATCHER_HTTP_ADDR"] || found["ops"] != env["OPS_ADDR"] {
		t.Fatalf("listening lines by server: %v, want api on %s and ops on %s", found, env["DISPATCHER_HTTP_ADDR"], env["OPS_ADDR"])
	}
}
