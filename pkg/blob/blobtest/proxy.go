// Package blobtest helps test what object storage clients do when the
// storage's answers cannot be trusted.
package blobtest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// Lie selects what LyingProxy misreports about object sizes.
type Lie int

const (
	// SmallStat answers HEAD (stat) requests with a Content-Length of one
	// byte, as if the object had been replaced by a larger one after it was
	// checked.
	SmallStat Lie = iota
	// NoLength also hides the length of GET responses (sent chunked), so a
	// client learns an object's size only by reading it.
	NoLength
)

// LyingProxy serves S3 requests for endpoint (host:port, plain HTTP) on a
// local address it returns, forwarding everything untouched (the Host header
// too, so request signatures stay valid) except the sizes that lie names. It
// stops when the test ends.
func LyingProxy(t testing.TB, endpoint string, lie Lie) string {
	t.Helper()
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: endpoint})
			r.Out.Host = r.In.Host
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				return nil
			}
			switch {
			case resp.Request.Method == http.MethodHead:
				resp.Header.Set("Content-Length", "1")
				resp.ContentLength = 1
			case lie == NoLength && resp.Request.Method == http.MethodGet && !strings.Contains(resp.Request.URL.RawQuery, "location"):
				resp.Header.Del("Content-Length")
				resp.ContentLength = -1
			}
			return nil
		},
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}
