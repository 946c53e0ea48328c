package main

import (
	"bytes"
	"mime/multipart"
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
// upload policy names the store as browsers reach it; a browser-like POST
// of the form (with an Origin: a form POST needs no preflight) stores the
// video there, the answer lets the page read its status (CORS), and the
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
	if err != nil || "http://"+u.Host != public || up.Method != http.MethodPost {
		t.Fatalf("upload URL %q (%s), want a POST at %s", up.UploadURL, up.Method, public)
	}
	const origin = "http://console.example"
	video, err := readFile(sampleVideo(t, "1"))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range up.Fields {
		mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile(up.FileField, "clip.mp4")
	fw.Write(video)
	mw.Close()
	post, _ := http.NewRequest(http.MethodPost, up.UploadURL, &body)
	post.Header.Set("Origin", origin)
	post.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(post)
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("POST to the public upload policy: %v %v", err, resp)
	}
	resp.Body.Close()
	if allow := resp.Header.Get("Access-Control-Allow-Origin"); allow != "*" && allow != origin {
		t.Fatalf("Access-Control-Allow-Origin %q: the page could not read the store's answer", allow)
	}
	var c created
	f.doJSON(t, "POST", "/api/tasks", map[string]any{"sourceVideoKey": up.SourceVideoKey}, http.StatusCreated, &c)
	var d struct {
		Links links `json:"links"`
	}
	f.doJSON(t, "GET", "/api/tasks/"+c.TaskID.String(), nil, http.StatusOK, &d)
	if d.Links.Source == nil || !strings.HasPrefix(*d.Links.Source, "/api/tasks/") {
		t.Fatalf("source link %v, want the console's own path", d.Links.Source)
	}
	resp = f.do(t, "GET", *d.Links.Source, readToken, "", nil)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(video)) {
		t.Fatalf("GET the source link: %d, %d bytes, want 200 and %d", resp.StatusCode, resp.ContentLength, len(video))
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
