package subtitle_test

import (
	"fmt"
	"os"

	"github.com/dubflow/dubflow/pkg/subtitle"
)

// A person's WebVTT file read into cues and written back as SubRip: the
// voice span becomes the cue's speaker, the formatting is dropped.
func Example() {
	file := "WEBVTT\n\n00:00.320 --> 00:02.480\n<v Anna>And so, <i>my fellow</i>\nAmericans\n"
	cues, err := subtitle.Parse([]byte(file), subtitle.Limits{DurationMS: 11000})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", cues[0])
	subtitle.WriteSRT(os.Stdout, cues)
	// Output:
	// {StartMS:320 EndMS:2480 Text:And so, my fellow Americans Speaker:Anna Second:}
	// 1
	// 00:00:00,320 --> 00:00:02,480
	// [Anna] And so, my fellow Americans
}

// A refusal names the line the problem is on.
func ExampleParse_refused() {
	_, err := subtitle.Parse([]byte("1\n00:00:01,000 --> 00:00:12,000\nask not\n"), subtitle.Limits{DurationMS: 11000})
	fmt.Println(err)
	// Output: line 2: the cue ends at 00:00:12,000, past the end of the video (00:00:11,000)
}
