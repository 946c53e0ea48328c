package main

import (
	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/step"
	"github.com/dubflow/dubflow/pkg/wire"
)

// stageGlossary stores the task's glossary (the payload's, when it carries
// one) with the step's success, for translate to apply.
func stageGlossary(msg *step.Message, terms []wire.Term) error {
	if len(terms) == 0 {
		return nil
	}
	b, err := dub.GlossaryJSON(terms)
	if err != nil {
		return fault.Permanent(err)
	}
	msg.Exec(dub.SaveGlossarySQL, msg.Envelope.TaskID, b)
	return nil
}
