package blob

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// LinkWindow aligns presigned download links: a link is signed as of the
// start of the LinkWindow it is made in and lives LinkWindow longer than
// asked, so that every link to one object made in the same window, by any
// process with the same signing settings, is the same URL. A browser's
// cache keeps a video across reloads of the page, and the console and
// dubctl's database mode (which signs with the console's settings) print
// the same links. A link lives at least its expiry from when it was made,
// at most LinkWindow more.
const LinkWindow = 5 * time.Minute

// maxPresignExpiry is the longest a SigV4 presigned URL may live.
const maxPresignExpiry = 7 * 24 * time.Hour

// Formats of SigV4's dates.
const (
	amzDateFormat  = "20060102T150405Z"
	amzScopeFormat = "20060102"
)

// alignedGet signs the GET URL u (as minio-go presigned it: its bucket
// style, host, credential and parameters) again as of at, truncated to
// LinkWindow, to live expiry+LinkWindow (at most seven days).
func (p *Presigner) alignedGet(u *url.URL, at time.Time, expiry time.Duration) (*url.URL, error) {
	return p.signAt(u, at.UTC().Truncate(LinkWindow), min(expiry+LinkWindow, maxPresignExpiry))
}

// signAt signs the GET URL u again as of t, to live life: AWS Signature
// Version 4 for a query string, as minio-go's PreSignV4 computes it (host
// the only signed header, an unsigned payload).
func (p *Presigner) signAt(u *url.URL, t time.Time, life time.Duration) (*url.URL, error) {
	creds, err := p.client.GetCreds()
	if err != nil {
		return nil, fmt.Errorf("presign: credentials: %w", err)
	}
	q := u.Query()
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 {
		return u, nil // anonymous credentials: minio-go signed nothing
	}
	region := cred[2]
	t = t.UTC()
	q.Del("X-Amz-Signature")
	q.Set("X-Amz-Date", t.Format(amzDateFormat))
	q.Set("X-Amz-Expires", strconv.FormatInt(int64(life/time.Second), 10))
	q.Set("X-Amz-Credential", strings.Join([]string{cred[0], t.Format(amzScopeFormat), region, "s3", "aws4_request"}, "/"))
	query := strings.ReplaceAll(q.Encode(), "+", "%20")
	canonical := strings.Join([]string{"GET", s3utils.EncodePath(u.Path), query, "host:" + u.Host + "\n", "host",
		"UNSIGNED-PAYLOAD"}, "\n")
	scope := strings.Join([]string{t.Format(amzScopeFormat), region, "s3", "aws4_request"}, "/")
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + t.Format(amzDateFormat) + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + creds.SecretAccessKey)
	for _, part := range []string{t.Format(amzScopeFormat), region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	out := *u
	out.RawQuery = query + "&X-Amz-Signature=" + hex.EncodeToString(hmacSHA256(key, toSign))
	return &out, nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// presignGetAt is PresignGet as of at (a test's clock).
func (p *Presigner) presignGetAt(ctx context.Context, key string, expiry time.Duration, download string, at time.Time) (*url.URL, error) {
	params := url.Values{}
	if download != "" {
		params.Set("response-content-disposition", fmt.Sprintf("attachment; filename=%q", download))
	}
	u, err := p.client.PresignedGetObject(ctx, p.bucket, key, expiry, params)
	if err != nil {
		return nil, fmt.Errorf("presign get %s: %w", key, err)
	}
	return p.alignedGet(u, at, expiry)
}
