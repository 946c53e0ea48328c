// Package web is the console's page: plain HTML, one stylesheet and one
// vanilla script, embedded in the binary. It holds no data and needs no
// authentication itself: the script reads everything from the JSON API
// under /api/ with the session cookie and goes to /login when the API
// answers 401.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// pages are the paths the script routes; each is answered with the same
// HTML shell. A page path followed by "/" and an id (/tasks/ID) is a page
// too.
var pages = []string{"/", "/login", "/tasks", "/upload", "/dead-letters", "/compensation", "/health", "/waiting", "/workers", "/audit"}

// contentSecurityPolicy allows only this origin's script and style; media
// may come from the object store's presigned links (another origin), and
// the page may connect to the object store (upload) as well as to itself.
func contentSecurityPolicy(storage string) string {
	connect := "'self'"
	if storage != "" {
		connect += " " + storage
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; " +
		"img-src 'self' data:; connect-src " + connect + "; media-src 'self' blob: http: https:; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
}

// Handler serves the page without access to an object store (uploads go
// through the console only).
func Handler() http.Handler { return HandlerFor("") }

// HandlerFor serves the page shell for the page routes and the assets
// under /static/ (fingerprinted: /static/app.js?v=HASH is cached for a
// year); storage (scheme://host[:port], or "") is the object store's
// origin, which the page may post large uploads to.
func HandlerFor(storage string) http.Handler {
	csp := contentSecurityPolicy(storage)
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	shell := renderShell(sub)
	assets := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		setSecurityHeaders(w.Header(), csp)
		if strings.HasPrefix(r.URL.Path, "/static/") {
			if r.URL.Query().Get("v") != "" {
				w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				w.Header().Set("Cache-Control", "no-cache")
			}
			assets.ServeHTTP(w, r)
			return
		}
		if !IsPage(r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(shell))
	})
}

// IsPage reports whether p is one of the page routes the script handles.
func IsPage(p string) bool {
	if p != "/" && strings.HasSuffix(p, "/") {
		p = strings.TrimSuffix(p, "/")
	}
	if p != path.Clean(p) {
		return false
	}
	for _, page := range pages {
		if p == page {
			return true
		}
	}
	// /tasks/{id}: one more segment under /tasks.
	id, ok := strings.CutPrefix(p, "/tasks/")
	return ok && id != "" && !strings.Contains(id, "/")
}

func setSecurityHeaders(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
}

// renderShell puts each asset's content hash into index.html's references
// (?v=HASH), so a new build is never served from a stale browser cache.
func renderShell(sub fs.FS) []byte {
	shell, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"app.js", "app.css", "favicon.svg"} {
		raw, err := fs.ReadFile(sub, name)
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(raw)
		ref := "/static/" + name
		shell = bytes.ReplaceAll(shell, []byte(ref+"\""), []byte(ref+"?v="+hex.EncodeToString(sum[:6])+"\""))
	}
	return shell
}
