package fault_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
)

func TestMarksSurviveWrapping(t *testing.T) {
	base := errors.New("engine said no")
	cases := []struct {
		name              string
		err               error
		permanent, parked bool
		hint              time.Duration
		hinted            bool
	}{
		{"plain", base, false, false, 0, false},
		{"permanent", fault.Permanent(base), true, false, 0, false},
		{"wrapped permanent", fmt.Errorf("transcribe: %w", fault.Permanent(base)), true, false, 0, false},
		{"retry after", fault.RetryAfter(base, 3*time.Second), false, false, 3 * time.Second, true},
		{"wrapped retry after", fmt.Errorf("call: %w", fault.RetryAfter(base, time.Minute)), false, false, time.Minute, true},
		{"park", fault.Park(base), false, true, 0, false},
		{"wrapped park", fmt.Errorf("tts: %w", fault.Park(base)), false, true, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := fault.IsPermanent(c.err); got != c.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, c.permanent)
			}
			if got := fault.IsParked(c.err); got != c.parked {
				t.Errorf("IsParked = %v, want %v", got, c.parked)
			}
			hint, ok := fault.RetryAfterHint(c.err)
			if ok != c.hinted || hint != c.hint {
				t.Errorf("RetryAfterHint = %v, %v; want %v, %v", hint, ok, c.hint, c.hinted)
			}
			if !errors.Is(c.err, base) {
				t.Errorf("the mark hides the cause: errors.Is(%v, base) is false", c.err)
			}
		})
	}
}

func TestMarkingNilIsNil(t *testing.T) {
	if fault.Permanent(nil) != nil || fault.RetryAfter(nil, time.Second) != nil || fault.Park(nil) != nil {
		t.Fatal("marking a nil error must give nil, so `return fault.Permanent(err)` stays a success when err is nil")
	}
}

func TestMarksKeepTheMessage(t *testing.T) {
	base := errors.New("no audio stream in videos/x/source.mp4")
	for _, err := range []error{fault.Permanent(base), fault.RetryAfter(base, time.Second), fault.Park(base)} {
		if err.Error() != base.Error() {
			t.Errorf("%T says %q, want %q", err, err.Error(), base.Error())
		}
	}
}

func ExamplePermanent() {
	err := fmt.Errorf("probe videos/1/source.mp4: %w", fault.Permanent(errors.New("no audio stream")))
	fmt.Println(fault.IsPermanent(err), err)
	// Output: true probe videos/1/source.mp4: no audio stream
}
