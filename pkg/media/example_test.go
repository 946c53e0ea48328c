package media_test

import (
	"fmt"

	"github.com/dubflow/dubflow/pkg/media"
)

// ExampleFit shows the ladder with the default bounds (1.3, rescue 1.5).
func ExampleFit() {
	slots := []media.Slot{
		{Idx: 0, StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 1500},    // shorter: padded
		{Idx: 1, StartMS: 2500, EndMS: 4000, NextStartMS: 4500, AudioMS: 1800}, // stretched to its line
		{Idx: 2, StartMS: 4500, EndMS: 6000, NextStartMS: 6500, AudioMS: 2400}, // at 1.3x, borrows
		{Idx: 3, StartMS: 6500, EndMS: 7500, NextStartMS: 7500, AudioMS: 1450}, // fits only over the bound
		{Idx: 4, StartMS: 7500, EndMS: 8500, AudioMS: 2000},                    // cut
	}
	for _, p := range media.Fit(slots, media.FitOptions{}) {
		fmt.Printf("%d: %-10s tempo %.3f plays %d ms, pad %d, borrowed %d, cut %d\n",
			p.Idx, p.Note, p.Tempo, p.OutMS, p.PadMS, p.BorrowedMS, p.TruncatedMS)
	}
	// Output:
	// 0: padded     tempo 1.000 plays 1500 ms, pad 500, borrowed 0, cut 0
	// 1: sped_up    tempo 1.200 plays 1500 ms, pad 0, borrowed 0, cut 0
	// 2: borrowed   tempo 1.300 plays 1847 ms, pad 0, borrowed 347, cut 0
	// 3: over_bound tempo 1.450 plays 1000 ms, pad 0, borrowed 0, cut 0
	// 4: truncated  tempo 1.500 plays 1000 ms, pad 0, borrowed 0, cut 334
}
