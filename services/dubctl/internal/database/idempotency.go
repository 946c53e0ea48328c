package database

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"time"

	"github.com/dubflow/dubflow/pkg/idempotency"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/services/dubctl/internal/cli"
	"github.com/dubflow/dubflow/services/dubctl/internal/shape"
	"github.com/google/uuid"
)

// submitOnce runs create for s at most once per user and
// --idempotency-key within idempotency.TTL, as the console does for its
// Idempotency-Key (pkg/idempotency): the same submission again returns the
// first task and creates nothing, a different one with the key is refused,
// one while the first is in flight waits for it, a failed one leaves the
// key free. The principal is "cli:<user>", the OS user running dubctl: a
// key sent through the console belongs to the console's token instead.
func submitOnce(ctx context.Context, db store.Querier, s shape.Submission,
	create func(ctx context.Context, s shape.Submission, id uuid.UUID) (uuid.UUID, error)) (uuid.UUID, error) {
	fp, err := fingerprint(s)
	if err != nil {
		return uuid.Nil, err
	}
	k := idempotency.Key{Principal: cliPrincipal(), Key: s.IdempotencyKey}
	owned, id, first, err := idempotency.Begin(ctx, db, k, fp, uuid.New(), time.Second)
	switch {
	case errors.Is(err, idempotency.ErrReused):
		return uuid.Nil, fmt.Errorf("Idempotency-Key %s: %w; choose a new key", s.IdempotencyKey, err)
	case err != nil:
		return uuid.Nil, err
	case !owned:
		return first.TaskID, nil
	}
	got, err := create(ctx, s, id)
	done := context.WithoutCancel(ctx)
	if err != nil {
		_ = idempotency.Abandon(done, db, k)
		return uuid.Nil, err
	}
	body, _ := json.Marshal(map[string]any{"taskId": got, "status": "queued", "sourceVideoKey": wire.DefaultKeys(got).SourceVideo})
	if err := idempotency.Finish(done, db, k, idempotency.Answer{TaskID: got, Status: http.StatusCreated, Body: body}); err != nil {
		return got, fmt.Errorf("task %s created, its idempotency key not recorded: %w", got, err)
	}
	return got, nil
}

// cliPrincipal names who submits from this dubctl: "cli:" and the OS user.
func cliPrincipal() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return fmt.Sprintf("cli:uid-%d", os.Getuid())
}

// fingerprint is what makes two submissions the same: the request's fields
// as given and the video's bytes.
func fingerprint(s shape.Submission) ([]byte, error) {
	f, err := os.Open(s.Input)
	if err != nil {
		return nil, cli.UsageError(fmt.Errorf("input: %w", err))
	}
	defer f.Close()
	video := sha256.New()
	if _, err := io.Copy(video, f); err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	fields, _ := json.Marshal(s.Req)
	h := sha256.New()
	fmt.Fprintf(h, "cli\x00%s\x00%x", fields, video.Sum(nil))
	return h.Sum(nil), nil
}
