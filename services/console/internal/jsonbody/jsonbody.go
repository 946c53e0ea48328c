// Package jsonbody reads the console's JSON request bodies: bounded,
// unknown fields, trailing values and NUL characters refused, and every
// refusal in the API's terms (the body's JSON names and types, never Go's).
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// MaxBytes bounds a request body other than a multipart video upload
// (POST /api/tasks with MAX_VIDEO_BYTES).
const MaxBytes = 1 << 20

// Decode reads a JSON request body of at most MaxBytes into v (a
// pointer to a struct); an empty body leaves v as it is. Every refusal is
// in the API's terms: 413 too_large past the bound; 400 naming the body's
// field by its JSON name and the JSON type it wants — never Go's struct,
// field or type names.
func Decode(r *http.Request, v any) error {
	return DecodeUpTo(r, v, MaxBytes)
}

// DecodeUpTo is Decode for a body of at most limit bytes (a
// task's, whose text fields hold files).
func DecodeUpTo(r *http.Request, v any, limit int64) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		return ReadError(err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	return Unmarshal(b, v)
}

// Unmarshal decodes one JSON value b into v, refusing unknown fields,
// anything after the value and NUL characters (which Postgres cannot
// store in a text).
func Unmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, v)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apierr.BadRequest("request body: more than one JSON value")
	}
	if hasNUL(b) {
		return apierr.BadRequest(`request body: a text holds a NUL character (\u0000)`)
	}
	return nil
}

// ReadError answers a body that could not be read: too large, or cut
// off by the client.
func ReadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return apierr.TooLarge(fmt.Sprintf("request body: more than %d bytes (%d MiB)", mbe.Limit, mbe.Limit>>20))
	}
	return apierr.BadRequest("request body: could not be read to its end")
}

// jsonError says in the API's terms why a body did not decode into v.
func jsonError(err error, v any) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return apierr.BadRequest(fmt.Sprintf("request body: not valid JSON (at byte %d)", syn.Offset))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return apierr.BadRequest("request body: not valid JSON (it ends early)")
	case errors.As(err, &typ) && typ.Field == "":
		return apierr.BadRequest(fmt.Sprintf("request body: want a JSON object, not %s", jsonValue(typ.Value)))
	case errors.As(err, &typ):
		return apierr.BadRequest(fmt.Sprintf("request body: field %q: want %s, not %s", typ.Field, jsonType(typ.Type), jsonValue(typ.Value)))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return apierr.BadRequest(fmt.Sprintf("request body: unknown field %s (want %s)", name, strings.Join(jsonFields(v), ", ")))
	}
	return apierr.BadRequest("request body: a value is not valid for this route")
}

// jsonType names what a Go type reads in JSON.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// jsonValue names the kind of JSON value encoding/json reports ("string",
// "number 1.5", "array", ...).
func jsonValue(v string) string {
	kind, _, _ := strings.Cut(v, " ")
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "true or false"
	case "":
		return "this value"
	}
	return "a " + kind
}

// jsonFields lists the JSON names of the fields of the struct v points
// to, sorted.
func jsonFields(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"no fields: send {} or nothing"}
	}
	return out
}

// hasNUL reports whether the valid JSON b holds a \u0000 escape in a
// string (outside strings JSON has no backslash; inside, every backslash
// starts an escape).
func hasNUL(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i++ // the escaped character
	}
	return false
}

// NoFields is the body of a POST that reads no field: nothing, or {}.
type NoFields struct{}
