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
	one := func(reason string) []problem { return []problem{{at, reason}} }
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var ps []problem
		for _, m := range k.Missing {
			ps = append(ps, problem{joinField(at, m), "required field is missing"})
		}
		return ps
	case *kind.AdditionalProperties:
		var ps []problem
		for _, p := range k.Properties {
			ps = append(ps, problem{joinField(at, p), "unknown field"})
		}
		return ps
	case *kind.Type:
		return one(fmt.Sprintf("must be %s, not %s", orList(withArticles(k.Want)), withArticle(k.Got)))
	case *kind.Enum:
		if at == "step" {
			return one(fmt.Sprintf("unknown step %s", jsonText(k.Got)))
		}
		var want []string
		for _, w := range k.Want {
			want = append(want, jsonText(w))
		}
		return one(fmt.Sprintf("must be one of %s, not %s", strings.Join(want, ", "), jsonText(k.Got)))
	case *kind.Const:
		return one("must be " + jsonText(k.Want))
	case *kind.Format:
		switch k.Want {
		case "uuid":
			return one("not a UUID")
		case "date-time":
			return one("not an RFC 3339 date-time like 2024-01-01T12:00:00Z")
		}
		return one("not a valid " + k.Want)
	case *kind.Minimum:
		return one("must be at least " + ratText(k.Want))
	case *kind.Maximum:
		return one("must be at most " + ratText(k.Want))
	case *kind.MinLength:
		if k.Want == 1 {
			return one("must not be empty")
		}
		return one(fmt.Sprintf("must be at least %d characters long", k.Want))
	case *kind.MaxLength:
		return one(fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got))
	case *kind.MinItems:
		if k.Want == 1 {
			return one("must not be empty")
		}
		return one(fmt.Sprintf("must have at least %d items", k.Want))
	case *kind.MaxItems:
		return one(fmt.Sprintf("must have at most %d items, got %d", k.Want, k.Got))
	case *kind.UniqueItems:
		return one(fmt.Sprintf("items %d and %d are equal", k.Duplicates[0], k.Duplicates[1]))
	case *kind.Pattern:
		if strings.HasSuffix(e.SchemaURL, "/$defs/objectKey") {
			if reason := keyProblem(k.Got); reason != "" {
				return one(reason)
			}
		}
		if msg, ok := r.messages[e.SchemaURL]; ok {
			return one(msg)
		}
		return one(fmt.Sprintf("does not match the pattern %s", k.Want))
	case *kind.FalseSchema:
		return one("is not allowed")
	}
	return one(e.ErrorKind.LocalizedString(printer))
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
