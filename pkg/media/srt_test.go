package media

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteSRTGolden(t *testing.T) {
	cues := []Cue{
		{StartMS: 320, EndMS: 2480, Text: "Buenos días."},
		{StartMS: 2900, EndMS: 5100, Text: "  Esta es una prueba  \r\n\r\n del doblaje. "},
		{StartMS: 5600, EndMS: 7000, Text: "   "}, // nothing to show: left out, numbering continues
		{StartMS: 3723004, EndMS: 3725999, Text: "Una hora, dos minutos, tres segundos.\nSegunda línea."},
	}
	var buf bytes.Buffer
	if err := WriteSRT(&buf, cues); err != nil {
		t.Fatal(err)
	}
	golden(t, "cues.srt.golden", buf.Bytes())
}

func TestWriteSRTRejectsBadTimes(t *testing.T) {
	for _, c := range []Cue{{StartMS: 2000, EndMS: 1000, Text: "x"}, {StartMS: -1, EndMS: 1000, Text: "x"}} {
		err := WriteSRT(&bytes.Buffer{}, []Cue{c})
		if err == nil || !strings.Contains(err.Error(), "bad times") {
			t.Errorf("%+v: got %v", c, err)
		}
	}
}

func TestWriteVTTAndBilingualGolden(t *testing.T) {
	dub := []Cue{
		{StartMS: 320, EndMS: 2480, Text: "Buenos días."},
		{StartMS: 2900, EndMS: 5100, Text: "Pulse <Intro> y después -->"},
		{StartMS: 5600, EndMS: 7000, Text: ""}, // no dub line, but a source line: still shown
		{StartMS: 3723004, EndMS: 3725999, Text: "Una hora."},
	}
	src := []Cue{
		{Text: "Good morning."}, {Text: "Press <Enter> & then -->"}, {Text: "Hm."}, {Text: "One hour.\nSecond line."},
	}
	for _, c := range []struct {
		name  string
		write func(*bytes.Buffer, []Cue) error
		cues  []Cue
	}{
		{"cues.vtt.golden", func(b *bytes.Buffer, c []Cue) error { return WriteVTT(b, c) }, dub},
		{"bilingual.vtt.golden", func(b *bytes.Buffer, c []Cue) error { return WriteVTT(b, c) }, Bilingual(dub, src)},
		{"bilingual.srt.golden", func(b *bytes.Buffer, c []Cue) error { return WriteSRT(b, c) }, Bilingual(dub, src)},
	} {
		var buf bytes.Buffer
		if err := c.write(&buf, c.cues); err != nil {
			t.Fatal(err)
		}
		golden(t, c.name, buf.Bytes())
	}
}
