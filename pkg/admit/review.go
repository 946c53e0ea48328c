package admit

import (
	"slices"
	"strings"

	"github.com/dubflow/dubflow/pkg/wire"
)

// splitReview reads the review values: stages separated by commas
// ("transcript,translation"), each once, each one of wire.ReviewStages;
// they come back in the order a task reaches them (none for none).
func splitReview(values []string) ([]string, error) {
	var asked []string
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			if slices.Contains(asked, s) {
				return nil, refuse("review", s, "named twice")
			}
			asked = append(asked, s)
		}
	}
	return asked, Review(asked, nil)
}

// Review checks the stages a task stops at for review: each one of
// "transcript" and "translation" (wire.ReviewStages), each once, and none
// for a task dubbed into several languages at once (targets: more than
// one), which is not reviewed. extract_audio calls it for a message an
// outside publisher sent; Check calls it for the doors.
func Review(stages, targets []string) error {
	for i, s := range stages {
		if !slices.Contains(wire.ReviewStages, s) {
			return refuse("review", s, "want transcript, translation or both (transcript,translation)")
		}
		if slices.Contains(stages[:i], s) {
			return refuse("review", s, "named twice")
		}
	}
	if len(stages) > 0 && len(targets) > 1 {
		return refuse("review", "", "a task dubbed into several languages at once is not reviewed; submit one language per task to review it")
	}
	return nil
}

// reviewOrder sorts stages in the order a task reaches them.
func reviewOrder(stages []string) []string {
	var out []string
	for _, s := range wire.ReviewStages {
		if slices.Contains(stages, s) {
			out = append(out, s)
		}
	}
	return out
}
