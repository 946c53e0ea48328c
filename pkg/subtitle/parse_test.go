package subtitle_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/subtitle"
)

func TestParseReadsBothFormats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		want       []subtitle.Cue
	}{
		{name: "SubRip with a byte-order mark, CRLF, formatting and two lines",
			file: "\ufeff1\r\n00:00:00,320 --> 00:00:02,480\r\n<i>And so,</i> my fellow\r\n{\\an8}<font color=\"#fff\">Americans</font>\r\n\r\n2\r\n00:00:03,000 --> 00:00:05,100 X1:10 X2:20\r\nask not\r\n",
			want: []subtitle.Cue{{StartMS: 320, EndMS: 2480, Text: "And so, my fellow Americans"}, {StartMS: 3000, EndMS: 5100, Text: "ask not"}}},
		{name: "SubRip without numbers or blank lines, dots for commas, old Mac line ends",
			file: "00:00:01.000 --> 00:00:02.000\rone\r2\r00:00:02,000 --> 00:00:03,000\rtwo\r00:00:04,000 --> 00:00:05,000\rthree",
			want: []subtitle.Cue{{StartMS: 1000, EndMS: 2000, Text: "one"}, {StartMS: 2000, EndMS: 3000, Text: "two"}, {StartMS: 4000, EndMS: 5000, Text: "three"}}},
		{name: "SubRip speakers: [Name] and Name:, a lone [sound] stays text",
			file: "1\n00:00:01,000 --> 00:00:02,000\n[Anna] Hola.\n\n2\n00:00:02,000 --> 00:00:03,000\nDr. Bob Smith: Hi\nthere.\n\n3\n00:00:03,000 --> 00:00:04,000\n[Music]\n\n4\n00:00:04,000 --> 00:00:05,000\nAnd so, my fellow Americans: ask not\n\n5\n00:00:05,000 --> 00:00:06,000\n10:30 is late\n",
			want: []subtitle.Cue{{StartMS: 1000, EndMS: 2000, Text: "Hola.", Speaker: "Anna"}, {StartMS: 2000, EndMS: 3000, Text: "Hi there.", Speaker: "Dr. Bob Smith"},
				{StartMS: 3000, EndMS: 4000, Text: "[Music]"}, {StartMS: 4000, EndMS: 5000, Text: "And so, my fellow Americans: ask not"},
				{StartMS: 5000, EndMS: 6000, Text: "10:30 is late"}}},
		{name: "SubRip: a cue without text is left out, a literal <Intro> is kept",
			file: "1\n00:00:01,000 --> 00:00:02,000\n<i></i>\n\n2\n00:00:02,000 --> 00:00:03,000\nPress <Intro> -->\n",
			want: []subtitle.Cue{{StartMS: 2000, EndMS: 3000, Text: "Press <Intro> -->"}}},
		{name: "SubRip: tags hidden in tags go too, others stay",
			file: "1\n00:00:01,000 --> 00:00:02,000\n<<i>i>a<FONT\tface=x>b</Font>{{\\an8}\\b1}<i{\\x}>c <x> {d} </font x>\n",
			want: []subtitle.Cue{{StartMS: 1000, EndMS: 2000, Text: "abc <x> {d} </font x>"}}},
		{name: "WebVTT with header, note, style, identifiers, settings, voices, references",
			file: "WEBVTT - a title\nKind: captions\n\nSTYLE\n::cue { color: red }\n\nNOTE a note\nthat spans lines\n\nintro\n00:01.000 --> 00:02.500 align:start position:10%\n<v.loud Anna Smith>Hola &amp; <b>adiós</b> &lt;3</v>\n\n00:00:02.500 --> 00:00:04.000\n<c.yellow>Bob:</c> fine&nbsp;thanks &#x263A; <00:00:03.000>later &unknown;\n\n1:00:00.000 --> 1:00:01.000\n<v Eve>one\n<v Zed>two\n",
			want: []subtitle.Cue{{StartMS: 1000, EndMS: 2500, Text: "Hola & adiós <3", Speaker: "Anna Smith"},
				{StartMS: 2500, EndMS: 4000, Text: "fine thanks ☺ later &unknown;", Speaker: "Bob"},
				{StartMS: 3600000, EndMS: 3601000, Text: "one two", Speaker: "Eve"}}},
		{name: "right-to-left text keeps its marks",
			file: "1\n00:00:01,000 --> 00:00:02,000\nمرحبا \u200f123\n",
			want: []subtitle.Cue{{StartMS: 1000, EndMS: 2000, Text: "مرحبا \u200f123"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := subtitle.Parse([]byte(tc.file), subtitle.Limits{})
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse = %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// Bad are malformed subtitle files and the refusal each gets, line and
// all; pkg/admit's tests run the same files through every door.
var bad = []struct {
	name, file string
	lim        subtitle.Limits
	want       string
}{
	{"empty", "", subtitle.Limits{}, "no cues: the file is empty"},
	{"blank lines and a byte-order mark", "\ufeff\n \r\n\n", subtitle.Limits{}, "no cues: the file is empty"},
	{"a header and nothing else", "WEBVTT\n\nNOTE nothing here\n", subtitle.Limits{}, "no cues: the file is empty"},
	{"cues without text", "1\n00:00:01,000 --> 00:00:02,000\n\n2\n00:00:02,000 --> 00:00:03,000\n<i> </i>\n", subtitle.Limits{}, "no cue has any text"},
	{"UTF-16", "\xff\xfe1\x00\n\x00", subtitle.Limits{}, "line 1: the file is UTF-16; save it as UTF-8"},
	{"Latin-1", "1\n00:00:01,000 --> 00:00:02,000\nhola\n\n2\n00:00:02,000 --> 00:00:03,000\ncaf\xe9\n", subtitle.Limits{}, "line 7: not valid UTF-8; save the file as UTF-8"},
	{"not a subtitle file", "hello\nworld\n", subtitle.Limits{}, `line 1: want a cue (a number, then a time range such as 00:00:01,000 --> 00:00:02,500), found "hello"`},
	{"a broken time range", "1\n00:00:01 --> 00:00:02\nhi\n", subtitle.Limits{}, `line 2: cannot read the time range "00:00:01 --> 00:00:02"; write it as 00:00:01,000 --> 00:00:02,500`},
	{"a WebVTT cue without a time range", "WEBVTT\n\nintro\nhello\n", subtitle.Limits{}, `line 3: want a cue (a number, then a time range such as 00:00:01.000 --> 00:00:02.500), found "intro"`},
	{"minutes past 59", "1\n00:61:00,000 --> 00:62:00,000\nhi\n", subtitle.Limits{}, "line 2: time 00:61:00,000: minutes and seconds go up to 59"},
	{"milliseconds with two digits", "1\n00:00:01,50 --> 00:00:02,000\nhi\n", subtitle.Limits{}, "line 2: time 00:00:01,50: write seconds with two digits and milliseconds with three (00:00:01,500)"},
	{"ends before it starts", "1\n00:00:03,000 --> 00:00:02,000\nhi\n", subtitle.Limits{}, "line 2: the cue ends (00:00:02,000) before it starts (00:00:03,000)"},
	{"ends where it starts", "WEBVTT\n\n00:03.000 --> 00:03.000\nhi\n", subtitle.Limits{}, "line 3: the cue ends (00:00:03.000) before it starts (00:00:03.000)"},
	{"overlapping cues", "1\n00:00:01,000 --> 00:00:03,000\nhi\n\n2\n00:00:02,500 --> 00:00:04,000\nho\n", subtitle.Limits{},
		"line 6: the cue starts (00:00:02,500) before the one before it ends (00:00:03,000); cues must not overlap"},
	{"out of order", "1\n00:00:05,000 --> 00:00:06,000\nhi\n\n2\n00:00:01,000 --> 00:00:02,000\nho\n", subtitle.Limits{}, "line 6: the cue starts (00:00:01,000) before the one before it ends"},
	{"past the video's end", "1\n00:00:01,000 --> 00:00:02,000\nhi\n\n2\n00:00:10,000 --> 00:00:12,000\nho\n", subtitle.Limits{DurationMS: 11000},
		"line 6: the cue ends at 00:00:12,000, past the end of the video (00:00:11,000)"},
	{"too many cues", "1\n00:00:01,000 --> 00:00:02,000\nhi\n\n2\n00:00:02,000 --> 00:00:03,000\nho\n", subtitle.Limits{MaxCues: 1}, "line 6: more than 1 cues"},
	{"a right-to-left override", "1\n00:00:01,000 --> 00:00:02,000\nok\nab\u202ecd\n", subtitle.Limits{}, "line 4: U+202E (RIGHT-TO-LEFT OVERRIDE) at character 3"},
	{"an escape sequence", "1\n00:00:01,000 --> 00:00:02,000\nred \x1b[31m\n", subtitle.Limits{}, "line 3: U+001B (ESCAPE) at character 5"},
	{"a NUL in WebVTT", "WEBVTT\n\n00:01.000 --> 00:02.000\nnul\x00\n", subtitle.Limits{}, "line 4: U+0000 (NUL) at character 4"},
	{"a reference to a control character", "WEBVTT\n\n00:01.000 --> 00:02.000\nbell&#7;\n", subtitle.Limits{}, "line 4: U+0007 (a control character) at character 5"},
	{"a byte-order mark inside", "1\n00:00:01,000 --> 00:00:02,000\nin\ufeffside\n", subtitle.Limits{}, "line 3: U+FEFF (BYTE ORDER MARK) at character 3"},
	{"a voice with brackets", "WEBVTT\n\n00:01.000 --> 00:02.000\n<v a&lt;b>hi\n", subtitle.Limits{}, `line 4: speaker name "a<b" holds a bracket ([ ] < >)`},
}

func TestParseRefusesWithTheLine(t *testing.T) {
	t.Parallel()
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			cues, err := subtitle.Parse([]byte(tc.file), tc.lim)
			var e *subtitle.Error
			if !errors.Is(err, subtitle.ErrInvalid) || !errors.As(err, &e) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Parse = %+v, %v\nwant %q...", cues, err, tc.want)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]subtitle.Format{"WEBVTT\n": subtitle.WebVTT, "\ufeffWEBVTT - x\n": subtitle.WebVTT, "WEBVTT": subtitle.WebVTT,
		"WEBVTTX\n": subtitle.SRT, "1\n00:00:01,000 --> 00:00:02,000\n": subtitle.SRT, "": subtitle.SRT} {
		if got := subtitle.Detect([]byte(file)); got != want {
			t.Errorf("Detect(%q) = %s, want %s", file, got, want)
		}
	}
}

func TestCheckSpeaker(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{"S1": "", " Anna Smith ": "", "Zoë": "", "": "a speaker's name is empty",
		strings.Repeat("x", 33): "is longer than 32 characters", "[x]": "holds a bracket", "a\u202eb": "U+202E"} {
		err := subtitle.CheckSpeaker(name)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("CheckSpeaker(%q) = %v, want %q", name, err, want)
		}
	}
}
