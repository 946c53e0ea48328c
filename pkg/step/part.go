package step

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dubflow/dubflow/pkg/wire"
)

// PartOf names the part of a fanned-out step that an envelope carries. The
// translate step is fanned out into one message per batch of segments, its
// part named by the batch's segment ids; every other step has one part, "".
// A name longer than 200 bytes becomes first..last#hash, which cannot be
// turned back into the ids: the message emitted for a part is kept with it
// (step_parts.message, see Message.Emit) for re-drives.
func PartOf(env *wire.Envelope) (string, error) {
	if env.Step != wire.StepTranslate {
		return "", nil
	}
	var p struct {
		SegmentIDs []string `json:"segment_ids"`
	}
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		return "", Permanent(fmt.Errorf("read translate segment ids: %w", err))
	}
	part := strings.Join(p.SegmentIDs, ",")
	if len(part) > 200 {
		sum := sha256.Sum256([]byte(part))
		part = p.SegmentIDs[0] + ".." + p.SegmentIDs[len(p.SegmentIDs)-1] + "#" + hex.EncodeToString(sum[:8])
	}
	return part, nil
}
