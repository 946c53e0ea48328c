package main

import (
	"bytes"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// publicAlias names the same object store by another host (localhost and
// 127.0.0.1), as a browser outside would by a public name.
func publicAlias(t *testing.T, endpoint string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	alias := "127.0.0.1"
	if host == alias {
		alias = "localhost"
	}
	return "http://" + net.JoinHostPort(alias, port)
}

// TestPresignedUploadAtThePublicAddress: with CONSOLE_PUBLIC_S3_URL the
// upload URL names the store as browsers reach it; a browser-like PUT
// (with an Origin, after a CORS preflight) stores the video there and the
// task starts from it.
func TestPresignedUploadAtThePublicAddress(t *testing.T) {
	t.Parallel()
	var public string
	f := setup(t, func(c *Config) {
		public = publicAlias(t, c.S3.Endpoint)
		c.PublicS3URL = public
	})
	var up upload
	f.doJSON(t, "POST", "/api/uploads", map[string]any{"contentType": "video/mp4"}, http.StatusCreated, &up)
	u, err := url.Parse(up.UploadURL)
	if err != nil || "http://"+u.Host != public || up.Method != http.MethodPut {
		t.Fatalf("upload URL %q (%s), want a PUT at %s", up.UploadURL, up.Method, public)
	}
	const origin = "http://console.example"
	pre, _ := http.NewRequest(http.MethodOptions, up.UploadURL, nil)
	pre.Header.Set("Origin", origin)
	pre.Header.Set("Access-Control-Request-Method", "PUT")
	pre.Header.Set("Access-Control-Request-Headers", "content-type")
	resp, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if allow := resp.Header.Get("Access-Control-Allow-Origin"); resp.StatusCode/100 != 2 || (allow != "*" && allow != origin) {
		t.Fatalf("CORS preflight: %d, Access-Control-Allow-Origin %q: the store must allow the console's origin", resp.StatusCode, allow)
	}
	video, err := readFile(sampleVideo(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	put, _ := http.NewRequest(http.MethodPut, up.UploadURL, bytes.NewReader(video))
	put.Header.Set("Origin", origin)
	put.Header.Set("Content-Type", "video/mp4")
	resp, err = http.DefaultClient.Do(put)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT to the public presigned URL: %v %v", err, resp)
	}
	resp.Body.Close()
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusCreated, &c)
	var d struct {
		Links links `json:"links"`
	}
	f.doJSON(t, "GET", "/api/tasks/"+c.TaskID.String(), nil, http.StatusOK, &d)
	if d.Links.Source == nil || !strings.HasPrefix(*d.Links.Source, public+"/") {
		t.Fatalf("source link %v, want one at %s", d.Links.Source, public)
	}
	resp, err = http.Get(*d.Links.Source)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(video)) {
		t.Fatalf("GET the public source link: %d, %d bytes, want 200 and %d", resp.StatusCode, resp.ContentLength, len(video))
	}
}

func TestPublicS3URLIsChecked(t *testing.T) {
	t.Parallel()
	cfg := Config{APIToken: adminToken, SessionHours: 1, PresignSeconds: 600, LoginPerMinute: 10, LoginBurst: 5}
	cfg.S3.Endpoint, cfg.S3.Bucket = "localhost:9000", "b"
	for _, bad := range []string{"localhost:9000", "ftp://x", "http://x/path"} {
		cfg.PublicS3URL = bad
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "CONSOLE_PUBLIC_S3_URL") {
			t.Errorf("CONSOLE_PUBLIC_S3_URL=%q: %v, want refused", bad, err)
		}
	}
}
