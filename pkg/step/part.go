package step

import (
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/wire"
)

// PartOf names the part of a fanned-out step that an envelope carries ("" for
// a step with one part). How a step fans out is declared by its payload type
// in the wire contract (wire.Parter): the runtime knows no step's business.
// A payload that cannot be read is a permanent error.
func PartOf(env *wire.Envelope) (string, error) {
	part, err := env.Part()
	if err != nil {
		return "", fault.Permanent(err)
	}
	return part, nil
}
