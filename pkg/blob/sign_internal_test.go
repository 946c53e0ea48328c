package blob

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/config"
)

// TestSignAtIsMinioSignature: signed again as of minio-go's own time and
// lifetime, a presigned URL is byte for byte the one minio-go made, for a
// key with characters that need escaping and a download name.
func TestSignAtIsMinioSignature(t *testing.T) {
	t.Parallel()
	p, err := NewPresigner(config.S3{AccessKey: "AKIDEXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		Bucket: "dubflow"}, "https://store.example.com:9443", "eu-west-3")
	if err != nil {
		t.Fatal(err)
	}
	params := url.Values{"response-content-disposition": {`attachment; filename="final .mp4"`}}
	for _, key := range []string{"outputs/abc/final.mp4", "outputs/a b/ñ+é=(1)&x.srt"} {
		u, err := p.client.PresignedGetObject(context.Background(), "dubflow", key, 90*time.Minute, params)
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(amzDateFormat, u.Query().Get("X-Amz-Date"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.signAt(u, at, 90*time.Minute)
		if err != nil || got.String() != u.String() {
			t.Fatalf("signAt:\n%s (%v)\nminio-go:\n%s", got, err, u)
		}
	}
}
