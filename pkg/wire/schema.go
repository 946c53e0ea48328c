package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dubflow/dubflow/proto"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaBase is the base of every schema's $id in proto/; references
// between the files resolve against it and never leave the embedded files.
const schemaBase = "https://dubflow.example/proto/"

// Schema names of the messages that are not envelopes.
const (
	schemaEnvelope     = "envelope"
	schemaDeadLetter   = "dead_letter"
	schemaCompensation = "tts_compensation"
	schemaEvent        = "event"
)

// registry holds the compiled schemas of proto/.
type registry struct {
	// steps lists the envelope's step enum, in schema order.
	steps []string
	// byName maps a schema name (file name without .schema.json) to it.
	byName map[string]*jsonschema.Schema
	// messages maps a schema location to its x-message.
	messages map[string]string
}

// schemas compiles proto.Schemas once.
var schemas = sync.OnceValues(func() (*registry, error) { return loadRegistry(proto.Schemas) })

// loadRegistry compiles the envelope schema, the payload schema named after
// each step of the envelope's enum, and the other message schemas.
func loadRegistry(fsys fs.FS) (*registry, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	r := &registry{byName: map[string]*jsonschema.Schema{}, messages: map[string]string{}}
	names, err := fs.Glob(fsys, "*.schema.json")
	if err != nil {
		return nil, fmt.Errorf("list schemas: %w", err)
	}
	docs := map[string]any{}
	for _, name := range names {
		f, err := fsys.Open(name)
		if err != nil {
			return nil, fmt.Errorf("open schema %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("parse schema %s: %w", name, err)
		}
		if err := c.AddResource(schemaBase+name, doc); err != nil {
			return nil, fmt.Errorf("add schema %s: %w", name, err)
		}
		docs[strings.TrimSuffix(name, ".schema.json")] = doc
		collectMessages(doc, schemaBase+name+"#", r.messages)
	}
	r.steps, err = stepEnum(docs[schemaEnvelope])
	if err != nil {
		return nil, err
	}
	want := append([]string{schemaEnvelope, schemaDeadLetter, schemaCompensation, schemaEvent}, r.steps...)
	for _, name := range want {
		s, err := c.Compile(schemaBase + name + ".schema.json")
		if err != nil {
			return nil, fmt.Errorf("compile schema %s: %w", name, err)
		}
		r.byName[name] = s
	}
	return r, nil
}

// stepEnum reads properties.step.enum of the envelope schema.
func stepEnum(doc any) ([]string, error) {
	var steps []string
	props, _ := field(doc, "properties").(map[string]any)
	enum, _ := field(props["step"], "enum").([]any)
	for _, v := range enum {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("envelope schema: step enum holds %v, not a string", v)
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		return nil, errors.New("envelope schema: no step enum")
	}
	return steps, nil
}

func field(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}

// collectMessages records the x-message of every schema node under loc.
func collectMessages(v any, loc string, into map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		if msg, ok := v["x-message"].(string); ok {
			into[loc] = msg
		}
		for k, child := range v {
			collectMessages(child, loc+"/"+escapePointer(k), into)
		}
	case []any:
		for i, child := range v {
			collectMessages(child, loc+"/"+strconv.Itoa(i), into)
		}
	}
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// validate checks v against the schema called name. Problems are reported
// with their field paths under prefix.
func (r *registry) validate(name string, v any, prefix string) error {
	s, ok := r.byName[name]
	if !ok {
		return fmt.Errorf("validate: no schema %q", name)
	}
	err := s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate against %s: %w", name, err)
	}
	return r.explain(ve, prefix)
}

// problem is one field and what is wrong with it.
type problem struct{ field, reason string }

// explain turns a validation error tree into an *InvalidError listing the
// problems of its leaves in field order.
func (r *registry) explain(ve *jsonschema.ValidationError, prefix string) *InvalidError {
	var ps []problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			ps = append(ps, r.describe(e, prefix)...)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(ps) == 0 {
		return invalid(prefix, ve.Error())
	}
	slices.SortFunc(ps, func(a, b problem) int {
		if c := strings.Compare(a.field, b.field); c != 0 {
			return c
		}
		return strings.Compare(a.reason, b.reason)
	})
	ps = slices.Compact(ps)
	out := invalid(ps[0].field, ps[0].reason)
	for _, p := range ps[1:] {
		out.More = append(out.More, (&InvalidError{Field: p.field, Reason: p.reason}).first())
	}
	return out
}

var printer = message.NewPrinter(language.English)

// describe words the problem of one leaf error.
func (r *registry) describe(e *jsonschema.ValidationError, prefix string) []problem {
	at := joinField(prefix, fieldPath(e.InstanceLocation))
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		return each(at, k.Missing, "required field is missing")
	case *kind.AdditionalProperties:
		return each(at, k.Properties, "unknown field")
	}
	return []problem{{at, r.reason(e, at)}}
}

// each is the same problem for each of the fields below at.
func each(at string, fields []string, reason string) []problem {
	var ps []problem
	for _, f := range fields {
		ps = append(ps, problem{joinField(at, f), reason})
	}
	return ps
}

// reason words what is wrong with the value at field at.
func (r *registry) reason(e *jsonschema.ValidationError, at string) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return fmt.Sprintf("must be %s, not %s", orList(withArticles(k.Want)), withArticle(k.Got))
	case *kind.Enum:
		return enumReason(k, at)
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.Format:
		return formatReason(k.Want)
	case *kind.Minimum:
		return "must be at least " + ratText(k.Want)
	case *kind.Maximum:
		return "must be at most " + ratText(k.Want)
	case *kind.MinLength:
		return atLeast(k.Want, "must be at least %d characters long")
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got)
	case *kind.MinItems:
		return atLeast(k.Want, "must have at least %d items")
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got)
	case *kind.UniqueItems:
		return fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Pattern:
		return r.patternReason(e, k)
	case *kind.FalseSchema:
		return "is not allowed"
	}
	return e.ErrorKind.LocalizedString(printer)
}

// enumReason words a value outside an enum; the step field's enum is the
// pipeline's steps.
func enumReason(k *kind.Enum, at string) string {
	if at == "step" {
		return fmt.Sprintf("unknown step %s", jsonText(k.Got))
	}
	var want []string
	for _, w := range k.Want {
		want = append(want, jsonText(w))
	}
	return fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), jsonText(k.Got))
}

// formatReason words a value not in the format want.
func formatReason(want string) string {
	switch want {
	case "uuid":
		return "not a UUID"
	case "date-time":
		return "not an RFC 3339 date-time like 2024-01-01T12:00:00Z"
	}
	return "not a valid " + want
}

// atLeast words a minimum length or count: "must not be empty" for 1.
func atLeast(want int, format string) string {
	if want == 1 {
		return "must not be empty"
	}
	return fmt.Sprintf(format, want)
}

// patternReason words a string that does not match its pattern: an object
// key's own problem, the message the schema gives the pattern, or the
// pattern itself.
func (r *registry) patternReason(e *jsonschema.ValidationError, k *kind.Pattern) string {
	if strings.HasSuffix(e.SchemaURL, "/$defs/objectKey") {
		if reason := keyProblem(k.Got); reason != "" {
			return reason
		}
	}
	if msg, ok := r.messages[e.SchemaURL]; ok {
		return msg
	}
	return fmt.Sprintf("does not match the pattern %s", k.Want)
}

// fieldPath formats an instance location as payload.segment_ids[0].
func fieldPath(loc []string) string {
	var b strings.Builder
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

func withArticle(jsonType string) string {
	switch jsonType {
	case "integer", "object", "array":
		return "an " + jsonType
	case "null":
		return "null"
	}
	return "a " + jsonType
}

func withArticles(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = withArticle(t)
	}
	return out
}

func orList(items []string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

func ratText(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// jsonText shows a decoded JSON value the way it was written.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		if len(s) > 64 {
			s = truncate(s, 64) + "…"
		}
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}
