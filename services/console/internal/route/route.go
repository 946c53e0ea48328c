// Package route is what the API's rooms share: a route (method, path, who
// may call it, whether it is audited, its handler), the principal a
// request acts as, the reading of a request's common parts (a task id, a
// limit, a time range) and the JSON answer. A room lists its routes
// (Routes) and answers its errors through a Fail it is given: the gate's,
// which knows every package's errors (internal/gate).
package route

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/dubflow/dubflow/services/console/internal/auth"
)

// Access is who may call a route.
type Access int

const (
	// Public routes need no authentication.
	Public Access = iota
	// Reader routes need any token or session.
	Reader
	// Admin routes change things: they need an admin across every
	// project, or a project's admin or operator (auth.Principal.CanAct).
	Admin
	// Manager routes manage a project's tokens: an admin across every
	// project, or the project's own admin.
	Manager
)

// Route is one API route; the OpenAPI document describes each.
type Route struct {
	Method, Path string
	Access       Access
	// Audit, when set, is the action every call is recorded as
	// (internal/auditlog).
	Audit  string
	Handle http.HandlerFunc
}

// Fail answers err with the status, code and text the API gives it.
type Fail func(w http.ResponseWriter, r *http.Request, err error)

// JSON answers v with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type principalKey struct{}

// WithPrincipal is r acting as p (set by the gate).
func WithPrincipal(r *http.Request, p auth.Principal) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
}

// PrincipalOf returns who the request acts as (the zero Principal for a
// public route).
func PrincipalOf(r *http.Request) auth.Principal {
	p, _ := r.Context().Value(principalKey{}).(auth.Principal)
	return p
}

// ProjectOf is the project a request's lists and actions keep to: the
// project's token's, "" (every project) for the configuration's tokens.
func ProjectOf(r *http.Request) string { return PrincipalOf(r).Project }
