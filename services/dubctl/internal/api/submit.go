package api

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// Rules are the default languages and media limits of dubctl's
// environment, without capabilities: dubctl has no database here, so the
// console judges what the engines can do (with the same pkg/admit text).
func (c *Client) Rules(context.Context) (admit.Rules, admit.Limits, error) {
	var cfg struct {
		config.Common
		config.Limits
	}
	if err := config.Load(config.Environ(), &cfg); err != nil {
		return admit.Rules{}, admit.Limits{}, err
	}
	return admit.Rules{DefaultSource: cfg.DefaultSourceLanguage, DefaultTarget: cfg.DefaultTargetLanguage},
		admit.LimitsOf(cfg.Limits), nil
}

// Submit streams the video to POST /api/tasks as a multipart form (never
// whole in memory) with the languages, speaker, glossary and subtitles.
func (c *Client) Submit(ctx context.Context, s shape.Submission) (uuid.UUID, error) {
	f, err := os.Open(s.Input)
	if err != nil {
		return uuid.Nil, cli.UsageError(fmt.Errorf("input: %w", err))
	}
	defer f.Close()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, kv := range [][2]string{{"source", s.Req.Source}, {"target", strings.Join(s.Req.Targets, ",")},
			{"speaker", s.Req.Speaker}, {"glossary", s.Req.Glossary}, {"subtitlesLanguage", s.Req.SubtitlesLanguage},
			{"burnSubtitles", s.Req.BurnSubtitles}, {"review", strings.Join(s.Req.Review, ",")},
			{"project", s.Project}} {
			if kv[1] != "" {
				_ = mw.WriteField(kv[0], kv[1])
			}
		}
		for _, kv := range [][2]string{{"subtitles", s.Req.Subtitles}, {"sourceSubtitles", s.Req.SourceSubtitles}} {
			if kv[1] != "" {
				if part, err := mw.CreateFormFile(kv[0], kv[0]); err == nil {
					_, _ = io.WriteString(part, kv[1])
				}
			}
		}
		part, err := mw.CreateFormFile("video", filepath.Base(s.Input))
		if err == nil {
			_, err = io.Copy(part, f)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	var created struct {
		TaskID uuid.UUID `json:"taskId"`
	}
	var headers [][2]string
	if s.IdempotencyKey != "" {
		headers = append(headers, [2]string{"Idempotency-Key", s.IdempotencyKey})
	}
	if err := c.do(ctx, http.MethodPost, "/api/tasks", mw.FormDataContentType(), pr, &created, headers...); err != nil {
		return uuid.Nil, err
	}
	return created.TaskID, nil
}
