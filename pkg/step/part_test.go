package step_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/jackc/pgx/v5"
)

// A fanned-out part keeps the message emitted for it (step_parts.message),
// so that the reconciler can re-drive a part whose message was lost before
// any worker claimed it — also a translate part whose name is a hash of its
// segment ids.
func TestEmitKeepsEachPartsMessage(t *testing.T) {
	t.Parallel()
	h := setup(t)
	var long []string
	for i := range 80 {
		long = append(long, wire.SegmentID(i))
	}
	asr := step.HandlerFunc(func(ctx context.Context, msg *step.Message) error {
		for _, ids := range [][]string{{"seg-0"}, long} {
			if err := msg.Emit(wire.StepTranslate, wire.Translate{TaskID: msg.Envelope.TaskID, SegmentIDs: ids,
				SourceLanguage: "en", TargetLanguage: "es"}); err != nil {
				return err
			}
		}
		return nil
	})
	h.run(wire.QueueASR, route(asr))
	env := asrEnvelope(t)
	h.publish(env)

	ctx := context.Background()
	var bodies map[string][]byte
	testenv.EventuallyWithin(t, time.Minute, "the translate parts", func() bool {
		rows, err := h.db.Pool.Query(ctx, `SELECT part, message FROM step_parts WHERE task_id = $1 AND step = 'translate'`, env.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		bodies = map[string][]byte{}
		var part string
		var body []byte
		if _, err := pgx.ForEachRow(rows, []any{&part, &body}, func() error {
			if body == nil {
				return errors.New("part " + part + " without its message")
			}
			bodies[part] = body
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return len(bodies) == 2
	})
	for part, body := range bodies {
		m, err := wire.Decode(body)
		if err != nil {
			t.Fatalf("message of part %q: %v", part, err)
		}
		if got, _ := step.PartOf(m); got != part || m.TaskID != env.TaskID || m.Attempt != 1 {
			t.Errorf("part %q keeps %+v (its part %q)", part, m, got)
		}
		var p wire.Translate
		if err := m.UnmarshalPayload(&p); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(part, "#") && strings.Join(p.SegmentIDs, ",") != strings.Join(long, ",") {
			t.Errorf("hashed part %q keeps segment ids %v", part, p.SegmentIDs)
		}
	}
}
