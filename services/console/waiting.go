package main

import (
	"net/http"

	"github.com/dubflow/dubflow/services/console/internal/waiting"
)

// waitingProxy relays a GET to the dispatcher's target route
// (internal/waiting), to DISPATCHER_URL as configured when it comes.
func (s *server) waitingProxy(target string) http.HandlerFunc {
	px := waiting.Proxy{Fail: s.fail,
		Dispatcher: func() (string, string) { return s.cfg.DispatcherURL, s.cfg.DispatcherToken }}
	return px.Route(target)
}
