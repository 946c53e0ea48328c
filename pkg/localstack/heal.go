package localstack

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// Heal asks the set to heal bucket now, as `mc admin heal -r` does
// (MinIO's admin API), until one pass finds every object with its shards on
// every drive: each object written while a process was away has them on
// that process's drive again. MinIO heals by itself too (right after a
// failed write, and in its background scanner, which takes hours at its
// default pace); Heal is for an operator, or a test, that wants it done
// now. It waits until every process sees every drive online (WaitOnline)
// and runs passes until one finds nothing missing.
func (s *MinioSet) Heal(ctx context.Context, bucket string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var all []int
	for i := range s.nodes {
		all = append(all, i)
	}
	if err := s.WaitOnline(ctx, all, within); err != nil {
		return err
	}
	for {
		missing, err := s.healPass(ctx, bucket)
		if err == nil && missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("heal %s: %d objects still missing a shard after the last pass (error: %v): %w", bucket, missing, err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// healItem is what a heal pass reports of one object.
type healItem struct {
	Type   string `json:"type"`
	Object string `json:"object"`
	After  struct {
		Drives []struct {
			State string `json:"state"`
		} `json:"drives"`
	} `json:"after"`
}

// healPass runs one heal of bucket to its end and returns how many objects
// it left without a shard on some drive.
func (s *MinioSet) healPass(ctx context.Context, bucket string) (int, error) {
	opts := []byte(`{"recursive":true,"dryRun":false,"remove":false,"scanMode":1}`)
	var start struct {
		ClientToken string `json:"clientToken"`
	}
	if err := s.admin(ctx, http.MethodPost, "", "/heal/"+bucket, url.Values{"forceStart": {"true"}}, opts, &start); err != nil {
		return 0, fmt.Errorf("start heal of %s: %w", bucket, err)
	}
	missing := 0
	for {
		var status struct {
			Summary string     `json:"Summary"`
			Detail  string     `json:"Detail"`
			Items   []healItem `json:"Items"`
		}
		if err := s.admin(ctx, http.MethodPost, "", "/heal/"+bucket, url.Values{"clientToken": {start.ClientToken}}, nil, &status); err != nil {
			return missing, fmt.Errorf("heal of %s: %w", bucket, err)
		}
		for _, it := range status.Items {
			for _, d := range it.After.Drives {
				if it.Type == "object" && d.State != "ok" {
					missing++
					break
				}
			}
		}
		switch status.Summary {
		case "finished":
			return missing, nil
		case "stopped":
			return missing, fmt.Errorf("heal of %s stopped: %s", bucket, status.Detail)
		}
		select {
		case <-ctx.Done():
			return missing, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// WaitOnline waits until each of the processes live (indexes) sees the
// drives of all of them online (the admin API's server info): a process
// just started, or one whose peers just stopped, takes a moment to be seen
// again, and a read or a heal started before that skips its drive.
func (s *MinioSet) WaitOnline(ctx context.Context, live []int, within time.Duration) error {
	return WaitFor(ctx, within, fmt.Sprintf("minio processes %v online to each other", live), func() bool {
		for _, i := range live {
			if !s.seesOnline(ctx, i, live) {
				return false
			}
		}
		return true
	})
}

// seesOnline reports whether process i sees the drives of every process
// of live online.
func (s *MinioSet) seesOnline(ctx context.Context, i int, live []int) bool {
	var info struct {
		Servers []struct {
			Drives []struct {
				Endpoint string `json:"endpoint"`
				State    string `json:"state"`
			} `json:"drives"`
		} `json:"servers"`
	}
	if err := s.admin(ctx, http.MethodGet, s.nodes[i].addr, "/info", nil, nil, &info); err != nil {
		return false
	}
	ok := map[string]bool{}
	for _, srv := range info.Servers {
		for _, d := range srv.Drives {
			ok[d.Endpoint] = d.State == "ok"
		}
	}
	for _, j := range live {
		if !ok["http://"+s.nodes[j].addr+s.nodes[j].drive] {
			return false
		}
	}
	return true
}

// admin sends body to the admin API's path on the process at addr (the
// first live one when empty), signed with the root credentials, and
// decodes the JSON answer into out.
func (s *MinioSet) admin(ctx context.Context, method, addr, path string, q url.Values, body []byte, out any) error {
	for i := range s.nodes {
		if addr == "" && s.Live(i) {
			addr = s.nodes[i].addr
		}
	}
	if addr == "" {
		return errors.New("no live minio process")
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/minio/admin/v3"+path+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	req = signer.SignV4(*req, MinioUser, MinioPassword, "", "us-east-1")
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(b))
	}
	return json.Unmarshal(b, out)
}
