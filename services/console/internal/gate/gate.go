// Package gate is the API's door: it serves the rooms' routes, and before
// a route's handler runs it authenticates the request, checks that the
// principal may call the route (its access and, for a project's token, its
// scope and the project of the id in its path) and checks the request
// against the route's part of the OpenAPI document (internal/contract). It
// answers the requests no route serves, and every error with the status,
// code and text the API gives it (Classify).
package gate

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/auditlog"
	"github.com/dubflow/dubflow/services/console/internal/auth"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/route"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Gate serves the API's routes.
type Gate struct {
	Auth *auth.Auth
	Pool *pgxpool.Pool
	Log  zerolog.Logger
	// Contract is the OpenAPI document's operations.
	Contract contract.Contract
	// Audit records the audited routes' calls and counts the refused
	// requests.
	Audit auditlog.Log
	// BodyLimit bounds the body of a request of op.
	BodyLimit func(op *contract.Op, r *http.Request) int64
	// Page serves every path not under /api/ (nil: 404).
	Page http.Handler
}

// Handler serves routes under /api/ and the page everywhere else. Every
// answer carries X-Content-Type-Options: nosniff. A request under /api/
// that reaches no route is authenticated first (401 without a token or
// session), then answered 405 with Allow for a path served with other
// methods, 400 for a path with a "." or ".." segment (also %2e-encoded)
// or an empty one, and 404 otherwise; only the public routes' paths
// answer 405 without authentication.
func (g Gate) Handler(routes []route.Route) http.Handler {
	mux := http.NewServeMux()
	nr := noRoute{g: g, paths: http.NewServeMux(), methods: map[string][]string{}, public: map[string]bool{}}
	for _, rt := range routes {
		mux.Handle(rt.Method+" "+rt.Path, g.guard(rt))
		if nr.methods[rt.Path] == nil {
			nr.paths.Handle(rt.Path, http.NotFoundHandler())
		}
		nr.methods[rt.Path] = append(nr.methods[rt.Path], rt.Method)
		nr.public[rt.Path] = nr.public[rt.Path] || rt.Access == route.Public
	}
	mux.Handle("/api/", nr)
	page := g.Page
	if page == nil {
		page = http.NotFoundHandler()
	}
	mux.Handle("/", page)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if strings.HasPrefix(r.URL.Path, "/api/") && !cleanPath(r.URL) {
			// Before the mux, which would redirect to the cleaned path.
			nr.answer(w, r, "", apierr.BadRequest("path: no \".\", \"..\" or empty segments (also %2e-encoded) in an API path"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// cleanPath reports whether u's path has no ".", ".." or empty segment,
// decoded or not.
func cleanPath(u *url.URL) bool {
	for _, p := range []string{u.Path, u.EscapedPath()} {
		segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
		for i, seg := range segs {
			dots := strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
			if dots == "." || dots == ".." || (seg == "" && i < len(segs)-1) {
				return false
			}
		}
	}
	return true
}

// noRoute answers the requests under /api/ that no route serves.
type noRoute struct {
	g Gate
	// paths matches the routes' path patterns whatever the method;
	// methods and public are each pattern's methods and whether a public
	// route serves it.
	paths   *http.ServeMux
	methods map[string][]string
	public  map[string]bool
}

func (nr noRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, pattern := nr.paths.Handler(r)
	if len(nr.methods[pattern]) == 0 {
		nr.answer(w, r, "", apierr.NotFound("no such API route: "+r.Method+" "+r.URL.Path))
		return
	}
	allowed := slices.Clone(nr.methods[pattern])
	if slices.Contains(allowed, http.MethodGet) {
		allowed = append(allowed, http.MethodHead)
	}
	slices.Sort(allowed)
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	nr.answer(w, r, pattern, apierr.MethodNotAllowed(fmt.Sprintf("%s %s: this path answers %s", r.Method, pattern, strings.Join(allowed, ", "))))
}

// answer authenticates the request unless pattern is a public route's
// path, then answers err.
func (nr noRoute) answer(w http.ResponseWriter, r *http.Request, pattern string, err error) {
	if !nr.public[pattern] {
		rt := route.Route{Method: r.Method, Path: "(no route)", Access: route.Reader}
		if _, ok := nr.g.authorize(w, r, rt); !ok {
			return
		}
	}
	nr.g.Fail(w, r, err)
}
