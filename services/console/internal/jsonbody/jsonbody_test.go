package jsonbody

import "testing"

// TestJSONErrorsInTheAPIsTerms: a body that does not decode is answered
// with its field's JSON name and JSON types, never Go's.
func TestJSONErrorsInTheAPIsTerms(t *testing.T) {
	t.Parallel()
	type body struct {
		Segment int      `json:"segment"`
		Text    string   `json:"text"`
		Langs   []string `json:"targetLanguages"`
	}
	for in, want := range map[string]string{
		`{"segment": "2"}`:           `request body: field "segment": want a whole number, not a string`,
		`{"segment": 1.5}`:           `request body: field "segment": want a whole number, not a number`,
		`{"text": 3}`:                `request body: field "text": want a string, not a number`,
		`{"targetLanguages": "es"}`:  `request body: field "targetLanguages": want an array, not a string`,
		`[1]`:                        `request body: want a JSON object, not an array`,
		`{"x": 1}`:                   `request body: unknown field "x" (want segment, targetLanguages, text)`,
		`{"segment": 1,`:             `request body: not valid JSON (it ends early)`,
		`{"segment" 1}`:              `request body: not valid JSON (at byte 12)`,
		`{} {}`:                      `request body: more than one JSON value`,
		`{"text": "a\u0000b"}`:       `request body: a text holds a NUL character (\u0000)`,
		`{"text": "a\\u0000b"}`:      ``,
		`{"segment": 2, "text": ""}`: ``,
	} {
		var v body
		err := Unmarshal([]byte(in), &v)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
