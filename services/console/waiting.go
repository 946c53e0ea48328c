package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxProxyBytes bounds a dispatcher answer relayed to the client.
const maxProxyBytes = 4 << 20

// waitingProxy relays a GET to the dispatcher's API (read-only view of the
// waiting queue): target is the dispatcher's path pattern, its {names}
// filled from the request's path values; the query (limit) goes along.
func (s *server) waitingProxy(target string) http.HandlerFunc {
	client := &http.Client{Timeout: 10 * time.Second}
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.DispatcherURL == "" {
			s.fail(w, r, unavailable("the waiting-queue view needs DISPATCHER_URL and DISPATCHER_API_TOKEN"))
			return
		}
		p := target
		for _, name := range []string{"id", "agentId"} {
			p = strings.ReplaceAll(p, "{"+name+"}", url.PathEscape(r.PathValue(name)))
		}
		if r.URL.RawQuery != "" {
			p += "?" + r.URL.RawQuery
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.cfg.DispatcherURL, "/")+p, nil)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		req.Header.Set("Authorization", "Bearer "+s.cfg.DispatcherToken)
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			s.fail(w, r, unavailable("dispatcher: "+err.Error()))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			// Not the caller's credentials: the console's own token is wrong.
			s.fail(w, r, unavailable("the dispatcher refused DISPATCHER_API_TOKEN"))
			return
		}
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, maxProxyBytes))
	}
}
