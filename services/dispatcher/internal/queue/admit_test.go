package queue

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestParseIDTakesOnlyCanonicalNonNilUUIDs(t *testing.T) {
	t.Parallel()
	const id = "6f0c7a52-3b1e-4d8e-9a57-1f2b7c0d4e13"
	for _, c := range []struct {
		in string
		ok bool
	}{
		{id, true},
		{strings.ToUpper(id), true},
		{"", false},
		{"00000000-0000-0000-0000-000000000000", false},
		{"{" + id + "}", false},
		{"urn:uuid:" + id, false},
		{strings.ReplaceAll(id, "-", ""), false},
		{id[:35], false},
		{id + "0", false},
		{"6f0c7a52-3b1e-4d8e-9a57-1f2b7c0d4e1g", false},
		{"6f0c7a52+3b1e-4d8e-9a57-1f2b7c0d4e13", false},
		{"..", false},
		{"%2e%2e", false},
	} {
		got, err := ParseID("project_id", c.in)
		if (err == nil) != c.ok {
			t.Errorf("ParseID(%q) = %v, %v; want ok=%v", c.in, got, err, c.ok)
			continue
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "project_id")) {
			t.Errorf("ParseID(%q) error %q: want ErrInvalid naming the field", c.in, err)
		}
		if c.ok && !strings.EqualFold(got.String(), c.in) {
			t.Errorf("ParseID(%q) = %s", c.in, got)
		}
	}
}

func TestTextLimitsCountCharactersAndRefuseControls(t *testing.T) {
	t.Parallel()
	cjk := strings.Repeat("字", MaxReason) // 765 bytes, 255 characters
	for _, c := range []struct {
		name, in  string
		multiline bool
		ok        bool
	}{
		{"255 CJK characters", cjk, false, true},
		{"256 CJK characters", cjk + "字", false, false},
		{"NUL", "a\x00b", true, false},
		{"escape", "a\x1b[31mb", true, false},
		{"DEL", "a\x7fb", true, false},
		{"C1 control", "a\u0085b", true, false},
		{"newline in a line", "a\nb", false, false},
		{"tab in a line", "a\tb", false, false},
		{"newline, tab, CR in text", "a\nb\tc\r\n", true, true},
		{"invalid UTF-8", "a\xffb", true, false},
		{"emoji", "need help 🙂", false, true},
	} {
		check := CheckLine
		if c.multiline {
			check = CheckText
		}
		err := check("reason", c.in, MaxReason)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestMetadataIsBoundedAndClean(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want string // want "": refused
	}{
		{"none", ``, `{}`},
		{"null", `null`, `{}`},
		{"object", `{"k": "v", "n": 1.5, "a": [1, {"b": true}]}`, `{"a":[1,{"b":true}],"k":"v","n":1.5}`},
		{"html kept", `{"k":"<b>"}`, `{"k":"<b>"}`},
		{"array", `[1]`, ""},
		{"string", `"x"`, ""},
		{"NUL in a value", `{"k":"a\u0000b"}`, ""},
		{"NUL in a key", `{"a\u0000":"v"}`, ""},
		{"NUL deep", `{"k":[{"x":"\u0000"}]}`, ""},
		{"newline in a key", `{"a\nb":"v"}`, ""},
		{"newline in a value", `{"k":"a\nb"}`, `{"k":"a\nb"}`},
		{"key too long", `{"` + strings.Repeat("k", MaxMetadataKey+1) + `":1}`, ""},
		{"number out of range", `{"k":1e400}`, ""},
		{"too big", `{"k":"` + strings.Repeat("v", MaxMetadataBytes) + `"}`, ""},
		{"not JSON", `{"k":`, ""},
	} {
		got, err := MetadataJSON(json.RawMessage(c.in))
		switch {
		case c.want == "" && (err == nil || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s: %s, %v; want refused", c.name, got, err)
		case c.want != "" && (err != nil || string(got) != c.want):
			t.Errorf("%s: %s, %v; want %s", c.name, got, err, c.want)
		}
	}
}

func TestAdmitAppliesEveryRule(t *testing.T) {
	t.Parallel()
	p, v := uuid.NewString(), uuid.NewString()
	r, err := Ask{Reason: strings.Repeat("字", 86), SessionID: strings.Repeat("频", MaxChannelID) + "@1", VisitorMessage: strings.Repeat("m", MaxVisitorMessage)}.
		Admit(p, v, SourceAIRequest)
	if err != nil || r.ChannelID != strings.Repeat("频", MaxChannelID) || r.ProjectID.String() != p {
		t.Fatalf("a request within the limits: %+v %v", r, err)
	}
	for name, c := range map[string]struct {
		project, visitor string
		ask              Ask
	}{
		"nil project":             {uuid.Nil.String(), v, Ask{}},
		"braced visitor":          {p, "{" + v + "}", Ask{}},
		"NUL in reason":           {p, v, Ask{Reason: "a\x00"}},
		"NUL in visitor_message":  {p, v, Ask{VisitorMessage: "a\x00"}},
		"visitor_message too big": {p, v, Ask{VisitorMessage: strings.Repeat("m", MaxVisitorMessage+1)}},
		"NUL in metadata":         {p, v, Ask{Metadata: json.RawMessage(`{"k":"\u0000"}`)}},
		"control in session":      {p, v, Ask{SessionID: "c\x01@1"}},
		"channel of 256":          {p, v, Ask{SessionID: strings.Repeat("频", 256) + "@1"}},
		"bad urgency":             {p, v, Ask{Urgency: "asap"}},
	} {
		if _, err := c.ask.Admit(c.project, c.visitor, SourceAIRequest); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
