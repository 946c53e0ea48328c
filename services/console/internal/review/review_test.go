package review

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/dubflow/dubflow/pkg/dub"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// TestReviewErrorsAnswerTheirStatus: a refused line or text is 400, a task
// not in review (or without lines) 409; anything else is left as it is.
func TestReviewErrorsAnswerTheirStatus(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]int{fmt.Errorf("line 9: %w", dub.ErrNoSegment): 400, fmt.Errorf("x: %w", dub.ErrInvalidText): 400,
		fmt.Errorf("x: %w", dub.ErrNotInReview): 409, fmt.Errorf("x: %w", dub.ErrNoLines): 409} {
		if ae, ok := apierr.As(reviewError(err)); !ok || ae.Status != want || ae.Message != err.Error() {
			t.Errorf("%v: %+v, want %d", err, ae, want)
		}
	}
	other := errors.New("x")
	if reviewError(other) != other {
		t.Error("another error was changed")
	}
}

// TestCountingWriterCountsWhatItPasses: the clip's writer counts what it
// wrote, so that a failure before any byte can still answer an error.
func TestCountingWriterCountsWhatItPasses(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	c := &countingWriter{w: w}
	_, _ = c.Write([]byte("RIFF"))
	_, _ = c.Write([]byte("...."))
	if c.n != 8 || w.Body.String() != "RIFF...." {
		t.Errorf("counted %d, passed %q", c.n, w.Body.String())
	}
}
