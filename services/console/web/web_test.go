package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPagesServeTheShell: every page route answers the HTML shell with a
// strict Content-Security-Policy; other paths are 404, not the shell.
func TestPagesServeTheShell(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/login", "/tasks", "/tasks/", "/tasks/3f6c1e2a-0000-4000-8000-000000000001",
		"/upload", "/dead-letters", "/compensation", "/health", "/waiting", "/workers", "/audit"} {
		r := get(t, h, p)
		if r.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", p, r.StatusCode)
			continue
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET %s: Content-Type %q", p, ct)
		}
		csp := r.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
		}
		if b := body(t, r); !strings.Contains(b, `<main id="app">`) {
			t.Errorf("GET %s: not the shell:\n%s", p, b)
		}
	}
	for _, p := range []string{"/nope", "/tasks/a/b", "/tasks/../etc", "/api/tasks", "/static/missing.js"} {
		if r := get(t, h, p); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, r.StatusCode)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/tasks", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /tasks: %d, want 405", rec.Code)
	}
}

// TestAssetsAreFingerprinted: the shell names each asset with a content
// hash, the fingerprinted URL is cached for good, and the bare URL is
// revalidated.
func TestAssetsAreFingerprinted(t *testing.T) {
	h := Handler()
	shell := body(t, get(t, h, "/tasks"))
	refs := regexp.MustCompile(`/static/([a-z.]+)\?v=([0-9a-f]{12})"`).FindAllStringSubmatch(shell, -1)
	if len(refs) != 3 {
		t.Fatalf("shell references %d fingerprinted assets, want 3 (app.js, app.css, favicon.svg):\n%s", len(refs), shell)
	}
	for _, ref := range refs {
		r := get(t, h, "/static/"+ref[1]+"?v="+ref[2])
		if r.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", ref[0], r.StatusCode)
		}
		if cc := r.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q, want immutable", ref[1], cc)
		}
		if b := body(t, r); len(b) == 0 {
			t.Errorf("%s is empty", ref[1])
		}
		if cc := get(t, h, "/static/"+ref[1]).Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s without a version: Cache-Control %q, want no-cache", ref[1], cc)
		}
	}
}

// TestScriptUsesNoExternalOrigin: the page works without a network: no
// script, style or font is fetched from another origin, and the script
// never writes HTML from strings.
func TestScriptUsesNoExternalOrigin(t *testing.T) {
	h := Handler()
	for _, name := range []string{"app.js", "app.css"} {
		src := body(t, get(t, h, "/static/"+name))
		if m := regexp.MustCompile(`(?:src|href|url|import)\s*[=(]\s*['"]?(?:https?:)?//`).FindString(src); m != "" {
			t.Errorf("%s loads from another origin: %q", name, m)
		}
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
	shell := body(t, get(t, h, "/"))
	if strings.Contains(shell, "<script>") || strings.Contains(shell, " style=") {
		t.Error("the shell has an inline script or style, which the Content-Security-Policy forbids")
	}
}

// TestPolicyLetsThePageUploadToTheObjectStore: the page may connect to the
// object store's origin (presigned POST of a large video), and only there.
func TestPolicyLetsThePageUploadToTheObjectStore(t *testing.T) {
	csp := get(t, HandlerFor("http://127.0.0.1:9000"), "/upload").Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "connect-src 'self' http://127.0.0.1:9000;") {
		t.Fatalf("Content-Security-Policy %q: want connect-src 'self' http://127.0.0.1:9000", csp)
	}
	if csp := get(t, Handler(), "/upload").Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") {
		t.Fatalf("without an object store: %q", csp)
	}
}
