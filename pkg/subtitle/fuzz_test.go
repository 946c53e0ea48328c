package subtitle_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/subtitle"
	"github.com/dubflow/dubflow/pkg/textrule"
)

// FuzzParse checks, for any bytes, that Parse either refuses them with an
// *Error or returns cues a dub can be made from (in order, not
// overlapping, within the limits, text and speakers within the text
// rule), and that writing those cues in either format and parsing them
// again gives the same cues.
func FuzzParse(f *testing.F) {
	for _, tc := range bad {
		f.Add([]byte(tc.file), tc.lim.DurationMS)
	}
	f.Add([]byte("WEBVTT\n\n00:01.000 --> 00:02.500\n<v.loud Anna>Hola &amp; <b>adiós</b>\n\nx\n00:03.000 --> 00:04.000\n[Bob] fine &#x263A;\n"), 0)
	f.Add([]byte("1\n00:00:01,000 --> 00:00:02,000\n<i>Anna:</i> {\\an8}hi\n2\n00:00:02,000 --> 00:00:03,000\n<<i>i>x\n"), 5000)
	f.Fuzz(func(t *testing.T, data []byte, duration int) {
		lim := subtitle.Limits{DurationMS: duration, MaxCues: 1000}
		cues, err := subtitle.Parse(data, lim)
		if err != nil {
			var e *subtitle.Error
			if !errors.As(err, &e) || !errors.Is(err, subtitle.ErrInvalid) || e.Line < 0 {
				t.Fatalf("Parse refused with %T %v", err, err)
			}
			return
		}
		checkCues(t, cues, lim)
		for _, format := range subtitle.Formats {
			if format == subtitle.SRT && srtTagsMayHide(cues) {
				continue // SubRip has no escapes: WriteSRT says so
			}
			var buf bytes.Buffer
			if err := subtitle.Write(&buf, format, cues); err != nil {
				t.Fatalf("Write %s: %v", format, err)
			}
			again, err := subtitle.Parse(buf.Bytes(), lim)
			if err != nil || !reflect.DeepEqual(again, cues) {
				t.Fatalf("Parse(Write %s) = %+v, %v\nwant %+v\nfile:\n%q", format, again, err, cues, buf.Bytes())
			}
		}
	})
}

// srtTagsMayHide reports whether a cue's text or speaker holds what SubRip
// reads as formatting (a WebVTT file's "&lt;i&gt;" is a literal "<i>").
func srtTagsMayHide(cues []subtitle.Cue) bool {
	for _, c := range cues {
		if strings.ContainsAny(c.Text+c.Speaker, "<{") {
			return true
		}
	}
	return false
}

// checkCues fails t unless cues obey what Parse promises.
func checkCues(t *testing.T, cues []subtitle.Cue, lim subtitle.Limits) {
	t.Helper()
	if len(cues) == 0 || len(cues) > lim.MaxCues {
		t.Fatalf("Parse returned %d cues", len(cues))
	}
	prevEnd := 0
	for _, c := range cues {
		switch {
		case c.StartMS < prevEnd || c.EndMS <= c.StartMS || lim.DurationMS > 0 && c.EndMS > lim.DurationMS:
			t.Fatalf("cue %+v after %d ms (limit %d)", c, prevEnd, lim.DurationMS)
		case c.Text == "" || textrule.Check(c.Text) != nil || c.Second != "":
			t.Fatalf("cue text %q: %v", c.Text, textrule.Check(c.Text))
		case c.Speaker != "" && subtitle.CheckSpeaker(c.Speaker) != nil:
			t.Fatalf("cue speaker %q: %v", c.Speaker, subtitle.CheckSpeaker(c.Speaker))
		}
		prevEnd = c.EndMS
	}
}
