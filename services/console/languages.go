package main

import (
	"fmt"
	"strings"

	"github.com/dubflow/dubflow/pkg/view"
	"github.com/dubflow/dubflow/pkg/wire"
)

// This file is the console's side of a task that dubs into several
// languages at once: a parent task names its
// targetLanguages; where its asr completes, one child task per language is
// spawned (id wire.ChildTaskID(parent, language)), each muxing the video it
// reads from videos/{child}/source.mp4.

// languagesView is the "languages" object of GET /api/tasks/{id}.
type languagesView = view.Languages

// parseTargets reads the target languages of a submission: each value one
// language or several separated by commas, each once, at most
// wire.MaxTargetLanguages; none gives the default.
func parseTargets(values []string, def string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, l := range strings.Split(v, ",") {
			l = strings.TrimSpace(l)
			if l == "" {
				continue
			}
			if !languagePattern.MatchString(l) {
				return nil, badRequest(fmt.Sprintf("target %q: want a language code such as en or es", l))
			}
			for _, seen := range out {
				if seen == l {
					return nil, badRequest(fmt.Sprintf("target names %q twice", l))
				}
			}
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		out = []string{def}
	}
	if len(out) > wire.MaxTargetLanguages {
		return nil, badRequest(fmt.Sprintf("target names %d languages, at most %d", len(out), wire.MaxTargetLanguages))
	}
	return out, nil
}
