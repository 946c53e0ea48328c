package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"
)

// The console's API (services/console/API.md). With CONSOLE_URL and
// DUBFLOW_API_TOKEN set and no DATABASE_URL, dubctl talks to the console
// only, so that an operator needs no database, broker or storage
// credentials: submit, status, wait (with progress, then the download of the
// dub and its subtitles), list and dlq list/show/replay.

// consoleClient calls the console's API with the bearer token.
type consoleClient struct {
	base  string
	token string
	http  *http.Client
}

// consoleFromEnv returns a client when CONSOLE_URL and DUBFLOW_API_TOKEN
// are set and DATABASE_URL is not (with it, dubctl uses the database as it
// always did), nil otherwise.
func consoleFromEnv(getenv func(string) string) *consoleClient {
	base, token := getenv("CONSOLE_URL"), getenv("DUBFLOW_API_TOKEN")
	if base == "" || token == "" || getenv("DATABASE_URL") != "" {
		return nil
	}
	return &consoleClient{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{}}
}

// consoleCommands are dubctl's commands over the console's API.
func (c *consoleClient) commands() []*cobra.Command {
	dlq := &cobra.Command{Use: "dlq", Short: "Inspect and replay dead letters (through the console)"}
	dlq.AddCommand(c.dlqListCmd(), c.dlqShowCmd(), c.dlqReplayCmd())
	return []*cobra.Command{c.submitCmd(), c.statusCmd(), c.waitCmd(), c.listCmd(), dlq, sampleCmd()}
}

// apiError is the console's error body.
type consoleError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// do sends a request and decodes a JSON answer into out; an answer other
// than 2xx is an error with the console's message.
func (c *consoleClient) do(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("console %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("console %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e consoleError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		err := fmt.Errorf("console: %s (HTTP %d)", e.Message, resp.StatusCode)
		if resp.StatusCode == http.StatusBadRequest {
			return usageError(err)
		}
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("console %s %s: decode: %w", method, path, err)
	}
	return nil
}

// getJSON reads path into a generic JSON value (for --json output).
func (c *consoleClient) getJSON(ctx context.Context, path string) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, http.MethodGet, path, "", nil, &raw)
}

func (c *consoleClient) printJSON(cmd *cobra.Command, path string) error {
	raw, err := c.getJSON(cmd.Context(), path)
	if err != nil {
		return err
	}
	return writeJSON(cmd.OutOrStdout(), raw)
}
