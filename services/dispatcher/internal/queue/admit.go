package queue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Admission: the rules every door applies to what it is given (the HTTP
// API and the task.waiting_queue messages run these same functions, so they
// refuse the same inputs with the same words). proto/waiting_*.schema.json
// says the same; a test runs one table of inputs through both.

// Limits of a visitor's request, in characters (Unicode code points, as
// JSON Schema's maxLength counts them), except MaxMetadataBytes.
const (
	// MaxReason bounds payload.reason (the column is varchar(255)).
	MaxReason = 255
	// MaxVisitorMessage bounds payload.visitor_message.
	MaxVisitorMessage = 65536
	// MaxSessionID bounds payload.session_id; its channel id holds at most
	// MaxChannelID.
	MaxSessionID = 300
	// MaxChannelID bounds the channel id of a session id.
	MaxChannelID = 255
	// MaxMetadataKey bounds each key of payload.metadata, at any depth.
	MaxMetadataKey = 255
	// MaxMetadataBytes bounds payload.metadata as stored: compact JSON.
	MaxMetadataBytes = 16384
	// MaxActor bounds who cancelled an order (the x-user-id header).
	MaxActor = 255
)

// invalidf is an ErrInvalid saying what is wrong.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ParseID reads the UUID named name in its canonical form: 36 characters,
// hex digits (either case) grouped 8-4-4-4-12 by hyphens — what the schemas'
// format "uuid" takes — and not the nil UUID, which names nothing. The other
// spellings uuid.Parse reads ({...}, urn:uuid:..., unhyphenated) are
// refused, so that every door takes the same ids. Errors wrap ErrInvalid.
func ParseID(name, s string) (uuid.UUID, error) {
	if !canonicalUUID(s) {
		if s == "" {
			return uuid.Nil, invalidf("%s is required (a UUID)", name)
		}
		return uuid.Nil, invalidf("%s %s: want a UUID like 6f0c7a52-3b1e-4d8e-9a57-1f2b7c0d4e13", name, shown(s))
	}
	id := uuid.MustParse(s)
	if id == uuid.Nil {
		return uuid.Nil, invalidf("%s: the nil UUID names nothing", name)
	}
	return id, nil
}

// canonicalUUID reports whether s is 8-4-4-4-12 hex digits.
func canonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// shown quotes a value for an error message: at most 40 characters of it,
// control characters escaped.
func shown(s string) string {
	if r := []rune(s); len(r) > 40 {
		return strconv.Quote(string(r[:40])) + "…"
	}
	return strconv.Quote(s)
}

// CheckLine refuses a value of field that is not valid UTF-8, is longer
// than max characters or holds a control character (U+0000–U+001F,
// U+007F–U+009F: NUL, line breaks, escapes). Errors wrap ErrInvalid.
func CheckLine(field, s string, max int) error {
	return checkText(field, s, max, false)
}

// CheckText is CheckLine for free text: tabs and line breaks (\t, \n, \r)
// are allowed, every other control character is refused.
func CheckText(field, s string, max int) error {
	return checkText(field, s, max, true)
}

func checkText(field, s string, max int, multiline bool) error {
	if !utf8.ValidString(s) {
		return invalidf("%s is not valid UTF-8", field)
	}
	n := 0
	for _, r := range s {
		n++
		if unicode.IsControl(r) && !(multiline && (r == '\t' || r == '\n' || r == '\r')) {
			return invalidf("%s: control character %U at character %d is not allowed", field, r, n)
		}
	}
	if n > max {
		return invalidf("%s: %d characters, at most %d", field, n, max)
	}
	return nil
}

// MetadataJSON checks a request's metadata and returns it as stored: a JSON
// object (none or null is {}), every key at any depth a line of at most
// MaxMetadataKey characters, every string value free text (CheckText),
// every number finite, at most MaxMetadataBytes as compact JSON. Errors
// wrap ErrInvalid.
func MetadataJSON(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return []byte(`{}`), nil
	}
	if !utf8.Valid(raw) {
		return nil, invalidf("metadata is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidf("metadata is not JSON")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, invalidf("metadata must be a JSON object, not %s", jsonKind(v))
	}
	if err := checkMetaValue("metadata", v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, invalidf("metadata: %v", err)
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(out) > MaxMetadataBytes {
		return nil, invalidf("metadata: %d bytes as compact JSON, at most %d", len(out), MaxMetadataBytes)
	}
	return out, nil
}

// checkMetaValue checks one metadata value at path and what it holds.
func checkMetaValue(path string, v any) error {
	switch v := v.(type) {
	case string:
		return CheckText(path, v, MaxMetadataBytes)
	case json.Number:
		if f, err := strconv.ParseFloat(string(v), 64); err != nil || math.IsInf(f, 0) {
			return invalidf("%s: number %s is out of range", path, shown(string(v)))
		}
	case []any:
		for i, item := range v {
			if err := checkMetaValue(fmt.Sprintf("%s[%d]", path, i), item); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if err := CheckLine(path+" key "+shown(k), k, MaxMetadataKey); err != nil {
				return err
			}
			if err := checkMetaValue(path+"."+k, v[k]); err != nil {
				return err
			}
		}
	}
	return nil
}

// jsonKind names the JSON type of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	}
	return "an object"
}
