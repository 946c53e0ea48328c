package subtitle_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/subtitle"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from golden file (run with -update if intended)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestWriteSRTGolden(t *testing.T) {
	t.Parallel()
	cues := []subtitle.Cue{
		{StartMS: 320, EndMS: 2480, Text: "Buenos días."},
		{StartMS: 2900, EndMS: 5100, Text: "  Esta es una prueba  \r\n\r\n del doblaje. "},
		{StartMS: 5600, EndMS: 7000, Text: "   "}, // nothing to show: left out, numbering continues
		{StartMS: 3723004, EndMS: 3725999, Text: "Una hora, dos minutos, tres segundos.\nSegunda línea."},
	}
	var buf bytes.Buffer
	if err := subtitle.WriteSRT(&buf, cues); err != nil {
		t.Fatal(err)
	}
	golden(t, "cues.srt.golden", buf.Bytes())
}

func TestWriteRejectsBadTimes(t *testing.T) {
	t.Parallel()
	for _, c := range []subtitle.Cue{{StartMS: 2000, EndMS: 1000, Text: "x"}, {StartMS: -1, EndMS: 1000, Text: "x"}} {
		for _, f := range subtitle.Formats {
			err := subtitle.Write(&bytes.Buffer{}, f, []subtitle.Cue{c})
			if err == nil || !strings.Contains(err.Error(), "bad times") {
				t.Errorf("%s %+v: got %v", f, c, err)
			}
		}
	}
}

func TestWriteVTTAndBilingualGolden(t *testing.T) {
	t.Parallel()
	dub := []subtitle.Cue{
		{StartMS: 320, EndMS: 2480, Text: "Buenos días."},
		{StartMS: 2900, EndMS: 5100, Text: "Pulse <Intro> y después -->"},
		{StartMS: 5600, EndMS: 7000, Text: ""}, // no dub line, but a source line: still shown
		{StartMS: 3723004, EndMS: 3725999, Text: "Una hora."},
	}
	src := []subtitle.Cue{
		{Text: "Good morning."}, {Text: "Press <Enter> & then -->"}, {Text: "Hm."}, {Text: "One hour.\nSecond line."},
	}
	for _, c := range []struct {
		name   string
		format subtitle.Format
		cues   []subtitle.Cue
	}{
		{"cues.vtt.golden", subtitle.WebVTT, dub},
		{"bilingual.vtt.golden", subtitle.WebVTT, subtitle.Bilingual(dub, src)},
		{"bilingual.srt.golden", subtitle.SRT, subtitle.Bilingual(dub, src)},
	} {
		var buf bytes.Buffer
		if err := subtitle.Write(&buf, c.format, c.cues); err != nil {
			t.Fatal(err)
		}
		golden(t, c.name, buf.Bytes())
	}
}

// TestWriteThenParseKeepsSpeakers is the review's round trip: cues with
// speakers and awkward text, written in either format, read back the same.
func TestWriteThenParseKeepsSpeakers(t *testing.T) {
	t.Parallel()
	cues := []subtitle.Cue{
		{StartMS: 0, EndMS: 1500, Text: "Press <Enter> & then --> go", Speaker: "S1"},
		{StartMS: 1500, EndMS: 2000, Text: "Note: no speaker here?", Speaker: "Anna & Bob"},
		{StartMS: 2100, EndMS: 3000, Text: "[laughs] yes", Speaker: "Zoë"},
		{StartMS: 3000, EndMS: 7_200_000, Text: "plain"},
	}
	for _, f := range subtitle.Formats {
		var buf bytes.Buffer
		if err := subtitle.Write(&buf, f, cues); err != nil {
			t.Fatal(err)
		}
		got, err := subtitle.Parse(buf.Bytes(), subtitle.Limits{})
		if err != nil || !reflect.DeepEqual(got, cues) || subtitle.Detect(buf.Bytes()) != f {
			t.Errorf("%s: Parse(Write) = %+v, %v\nwant %+v\nfile:\n%s", f, got, err, cues, buf.Bytes())
		}
	}
}
