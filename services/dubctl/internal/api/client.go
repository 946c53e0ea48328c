package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/google/uuid"
)

// consolePoll is how often console mode's wait reads the task again.
const consolePoll = time.Second

// Client is console mode: dubctl calls the console's API
// (services/console/API.md) with the bearer token and needs no database,
// broker or storage credentials; the API answers the read model's JSON.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// FromEnv returns console mode when CONSOLE_URL and
// DUBFLOW_API_TOKEN are set and DATABASE_URL is not, nil otherwise.
func FromEnv(getenv func(string) string) *Client {
	base, token := getenv("CONSOLE_URL"), getenv("DUBFLOW_API_TOKEN")
	if base == "" || token == "" || getenv("DATABASE_URL") != "" {
		return nil
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{}}
}

// Close has nothing to release.
func (c *Client) Close() {}

// consoleError is the console's error body.
type consoleError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// do sends a request and decodes a JSON answer into out. An answer other
// than 2xx is an error whose text is the console's message as it is — the
// text the same error has in database mode — a usage error (exit 2) for
// 400 and 413. headers are added to the request.
func (c *Client) do(ctx context.Context, method, path, contentType string, body io.Reader, out any, headers ...[2]string) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("console %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("console %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return answerError(resp)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("console %s %s: decode: %w", method, path, err)
	}
	return nil
}

// answerError is the error of an answer other than 2xx: the console's
// message; an answer that is not the console's error (a proxy's page) is
// named by its status.
func answerError(resp *http.Response) error {
	var e consoleError
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var err error
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		err = errors.New(e.Message)
	} else {
		err = fmt.Errorf("console %s: HTTP %d: %s", resp.Request.URL.Redacted(), resp.StatusCode,
			cli.Shorten(strings.TrimSpace(string(b)), 200))
	}
	if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusRequestEntityTooLarge {
		return cli.UsageError(err)
	}
	return err
}

// Get reads path into out.
func (c *Client) Get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, "", nil, out)
}

// post sends body as JSON to path and reads the answer into out.
func (c *Client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("console POST %s: %w", path, err)
	}
	return c.do(ctx, http.MethodPost, path, "application/json", bytes.NewReader(b), out)
}

func TaskPath(id uuid.UUID, tail string) string { return "/api/tasks/" + id.String() + tail }
