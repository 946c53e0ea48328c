package blobtest

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"testing"
)

// Post sends file to a presigned upload (an S3 POST policy, blob.Upload)
// as a browser's form does: fields first, then the file as field (last:
// the store reads the rest of the body as the file). It returns the
// store's status and body.
func Post(t testing.TB, url string, fields map[string]string, field string, file []byte) (int, string) {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := mw.CreateFormFile(field, "upload")
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(file)
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatalf("POST to the presigned upload: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
