package media_test

import (
	"fmt"

	"github.com/dubflow/dubflow/pkg/media"
)

func ExampleFit() {
	slots := []media.Slot{
		{Idx: 0, StartMS: 0, EndMS: 2000, NextStartMS: 2500, AudioMS: 1500},    // shorter: padded
		{Idx: 1, StartMS: 2500, EndMS: 4000, NextStartMS: 4500, AudioMS: 1800}, // borrows 300 ms
		{Idx: 2, StartMS: 4500, EndMS: 6000, NextStartMS: 6000, AudioMS: 1900}, // sped up
		{Idx: 3, StartMS: 6000, EndMS: 7000, AudioMS: 2000},                    // cut
	}
	for _, p := range media.Fit(slots, media.FitOptions{MaxSpeedup: 1.35}) {
		fmt.Printf("%d: %-9s tempo %.3f plays %d ms, pad %d, borrowed %d, cut %d\n",
			p.Idx, p.Note, p.Tempo, p.OutMS, p.PadMS, p.BorrowedMS, p.TruncatedMS)
	}
	// Output:
	// 0: padded    tempo 1.000 plays 1500 ms, pad 500, borrowed 0, cut 0
	// 1: borrowed  tempo 1.000 plays 1800 ms, pad 0, borrowed 300, cut 0
	// 2: sped_up   tempo 1.267 plays 1500 ms, pad 0, borrowed 0, cut 0
	// 3: truncated tempo 1.350 plays 1000 ms, pad 0, borrowed 0, cut 482
}
