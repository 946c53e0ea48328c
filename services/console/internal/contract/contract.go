// Package contract reads the console's OpenAPI document and applies to
// each request what it says of the request's operation.
package contract

import (
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
	"github.com/google/uuid"
)

// The request checks every route shares are read from the OpenAPI
// document (openapi.json), so that what the document says a route takes is
// what the server accepts: its path and query parameters (an unknown or
// repeated query parameter, a value outside its type, enum or bounds is
// refused), the media types of its body, and the bound of a body's size.
// A route's handler still checks what the document cannot say.

// Op is what the document says of one operation.
type Op struct {
	Params map[string]Param // path and query parameters by name
	Query  []string         // the query parameters' names, sorted
	// BodyTypes are the media types of the request body; none when the
	// operation reads no body. BodyRequired: a body must come.
	BodyTypes    []string
	BodyRequired bool
	// Errors are the documented error answers: status → codes.
	Errors map[int][]string
	// Scope is the operation's x-scope: ScopeProject (a project's token
	// may call it, on its project's resources only) or ScopeSystem (admins
	// across every project only: 403 to a project's token); "" is
	// ScopeSystem.
	Scope string
}

// Param is one parameter's schema, as far as the checks read it.
type Param struct {
	In        string   `json:"in"`
	Name      string   `json:"name"`
	Required  bool     `json:"required"`
	Type      string   `json:"type"`
	Format    string   `json:"format"`
	Enum      []string `json:"enum"`
	Minimum   *float64 `json:"minimum"`
	Maximum   *float64 `json:"maximum"`
	MaxLength *int     `json:"maxLength"`
}

// Contract is every operation's spec, by "METHOD /path/{pattern}".
type Contract map[string]*Op

// The scopes of an operation (x-scope).
const (
	ScopeProject = "project"
	ScopeSystem  = "system"
)

// openapiDocument is the part of openapi.json the checks read.
type openapiDocument struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Parameters map[string]rawParam    `json:"parameters"`
		Responses  map[string]rawResponse `json:"responses"`
	} `json:"components"`
}

type rawParam struct {
	Ref      string          `json:"$ref"`
	In       string          `json:"in"`
	Name     string          `json:"name"`
	Required bool            `json:"required"`
	Schema   json.RawMessage `json:"schema"`
}

type rawResponse struct {
	Ref     string `json:"$ref"`
	Content map[string]struct {
		Schema struct {
			Properties struct {
				Code struct {
					Enum []string `json:"enum"`
				} `json:"code"`
			} `json:"properties"`
		} `json:"schema"`
	} `json:"content"`
}

type rawOperation struct {
	Parameters  []rawParam `json:"parameters"`
	RequestBody *struct {
		Required bool                       `json:"required"`
		Content  map[string]json.RawMessage `json:"content"`
	} `json:"requestBody"`
	Responses map[string]rawResponse `json:"responses"`
	Scope     string                 `json:"x-scope"`
}

// Parse reads the operations of an OpenAPI document; a parameter
// or response that refers to nothing is an error.
func Parse(doc []byte) (Contract, error) {
	var d openapiDocument
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	out := Contract{}
	for path, ops := range d.Paths {
		for method, raw := range ops {
			var op rawOperation
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("openapi.json %s %s: %w", method, path, err)
			}
			spec, err := d.spec(op)
			if err != nil {
				return nil, fmt.Errorf("openapi.json %s %s: %w", method, path, err)
			}
			out[strings.ToUpper(method)+" "+path] = spec
		}
	}
	return out, nil
}

// spec resolves one operation.
func (d *openapiDocument) spec(op rawOperation) (*Op, error) {
	s := &Op{Params: map[string]Param{}, Errors: map[int][]string{}, Scope: op.Scope}
	if s.Scope != "" && s.Scope != ScopeProject && s.Scope != ScopeSystem {
		return nil, fmt.Errorf("x-scope %q: want %s or %s", op.Scope, ScopeProject, ScopeSystem)
	}
	for _, rp := range op.Parameters {
		p, err := d.param(rp)
		if err != nil {
			return nil, err
		}
		if p.In == "path" || p.In == "query" {
			s.Params[p.Name] = p
		}
		if p.In == "query" {
			s.Query = append(s.Query, p.Name)
		}
	}
	slices.Sort(s.Query)
	if op.RequestBody != nil {
		for mt := range op.RequestBody.Content {
			s.BodyTypes = append(s.BodyTypes, mt)
		}
		slices.Sort(s.BodyTypes)
		s.BodyRequired = op.RequestBody.Required
	}
	for status, r := range op.Responses {
		code, err := strconv.Atoi(status)
		if err != nil {
			return nil, fmt.Errorf("response %q: want a status code (no default: every answer is listed)", status)
		}
		if code < 400 {
			continue
		}
		if r.Ref != "" {
			name := strings.TrimPrefix(r.Ref, "#/components/responses/")
			ref, ok := d.Components.Responses[name]
			if !ok {
				return nil, fmt.Errorf("response %s: no %s", status, r.Ref)
			}
			r = ref
		}
		codes := r.Content["application/json"].Schema.Properties.Code.Enum
		if len(codes) == 0 {
			return nil, fmt.Errorf("response %s: its schema lists no error code (properties.code.enum)", status)
		}
		s.Errors[code] = codes
	}
	return s, nil
}

// param resolves a parameter and its schema.
func (d *openapiDocument) param(rp rawParam) (Param, error) {
	if rp.Ref != "" {
		name := strings.TrimPrefix(rp.Ref, "#/components/parameters/")
		ref, ok := d.Components.Parameters[name]
		if !ok {
			return Param{}, fmt.Errorf("parameter %s: not in components.parameters", rp.Ref)
		}
		rp = ref
	}
	p := Param{}
	if len(rp.Schema) > 0 {
		if err := json.Unmarshal(rp.Schema, &p); err != nil {
			return p, fmt.Errorf("parameter %s: %w", rp.Name, err)
		}
	}
	p.In, p.Name, p.Required = rp.In, rp.Name, rp.Required
	return p, nil
}

// CheckRequest applies the document's checks to a request of op: its
// body's size and media type, its path and query parameters. limit bounds
// the body.
func (op *Op) CheckRequest(w http.ResponseWriter, r *http.Request, limit int64) error {
	if op == nil {
		op = &Op{}
	}
	if r.ContentLength > limit {
		return apierr.TooLarge(fmt.Sprintf("request body: %d bytes, at most %d", r.ContentLength, limit))
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := op.checkPath(r); err != nil {
		return err
	}
	if err := op.checkQuery(r.URL.RawQuery); err != nil {
		return err
	}
	return op.checkBody(r)
}

// checkBody refuses a body of a media type the operation does not take;
// a POST that takes no body accepts none, or {} as application/json.
func (op *Op) checkBody(r *http.Request) error {
	present := r.ContentLength != 0
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case len(op.BodyTypes) > 0:
		if (present || op.BodyRequired) && !slices.Contains(op.BodyTypes, mt) {
			return apierr.UnsupportedMediaType(fmt.Sprintf("Content-Type %q: want %s", apierr.CutEcho(mt), strings.Join(op.BodyTypes, " or ")))
		}
	case r.Method == http.MethodGet || r.Method == http.MethodHead || !present:
	case mt != "application/json":
		return apierr.UnsupportedMediaType(fmt.Sprintf("Content-Type %q: this route reads no body (send none, or {} as application/json)", apierr.CutEcho(mt)))
	default:
		return jsonbody.Decode(r, &jsonbody.NoFields{})
	}
	return nil
}

// checkPath checks the path values: a UUID in its canonical form (any
// case) and not nil; an integer within its bounds; a value outside an enum
// names nothing (404).
func (op *Op) checkPath(r *http.Request) error {
	for _, p := range op.Params {
		if p.In != "path" {
			continue
		}
		v := r.PathValue(p.Name)
		if err := p.check(v); err != nil {
			return err
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
			return apierr.NotFound(fmt.Sprintf("no such %s %q (want one of %s)", p.Name, apierr.Short(v), strings.Join(p.Enum, ", ")))
		}
	}
	return nil
}

// checkQuery checks the query string: every parameter documented, none
// repeated, no control characters, each value of its type (an empty value
// is as good as none).
func (op *Op) checkQuery(raw string) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return apierr.BadRequest("query: not a valid query string (bad % escape or ;)")
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range q {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range names {
		p, ok := op.Params[name]
		if !ok || p.In != "query" {
			return apierr.BadRequest(fmt.Sprintf("unknown query parameter %q (%s)", apierr.Short(name), op.queryNames()))
		}
		if len(q[name]) > 1 {
			return apierr.BadRequest(fmt.Sprintf("query parameter %q given %d times, want it once", name, len(q[name])))
		}
		v := q[name][0]
		if v == "" {
			continue
		}
		if err := p.check(v); err != nil {
			return err
		}
		if len(p.Enum) > 0 && !slices.Contains(p.Enum, v) {
			return apierr.BadRequest(fmt.Sprintf("%s %q: want one of %s", name, apierr.Short(v), strings.Join(p.Enum, ", ")))
		}
	}
	return nil
}

// queryNames says which query parameters the operation takes.
func (op *Op) queryNames() string {
	if len(op.Query) == 0 {
		return "this route takes none"
	}
	return "want " + strings.Join(op.Query, ", ")
}

// check checks v against the parameter's type, format and bounds (not its
// enum: a path and a query answer that differently).
func (p Param) check(v string) error {
	if !utf8.ValidString(v) || strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return apierr.BadRequest(fmt.Sprintf("%s: control characters or invalid UTF-8 are not allowed", p.Name))
	}
	if p.MaxLength != nil && utf8.RuneCountInString(v) > *p.MaxLength {
		return apierr.BadRequest(fmt.Sprintf("%s: %d characters, at most %d", p.Name, utf8.RuneCountInString(v), *p.MaxLength))
	}
	switch {
	case p.Format == "uuid":
		return checkUUID(p.Name, v)
	case p.Type == "integer":
		return p.checkInteger(v)
	case p.Type == "boolean" && v != "true" && v != "false":
		return apierr.BadRequest(fmt.Sprintf("%s %q: want true or false", p.Name, apierr.Short(v)))
	}
	return nil
}

// checkUUID accepts a UUID in its canonical form, 8-4-4-4-12 hexadecimal
// digits in any case, other than the nil UUID.
func checkUUID(name, v string) error {
	id, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		return apierr.BadRequest(fmt.Sprintf("%s %q: want a UUID such as 3f2504e0-4f89-41d3-9a0c-0305e82c3301", name, apierr.Short(v)))
	}
	if id == uuid.Nil {
		return apierr.BadRequest(fmt.Sprintf("%s %q: the nil UUID names nothing", name, v))
	}
	return nil
}

// checkInteger accepts a decimal integer within the parameter's bounds.
func (p Param) checkInteger(v string) error {
	lo, hi := math.Inf(-1), math.Inf(1)
	if p.Minimum != nil {
		lo = *p.Minimum
	}
	if p.Maximum != nil {
		hi = *p.Maximum
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err == nil && float64(n) >= lo && float64(n) <= hi {
		return nil
	}
	want := "a whole number"
	switch {
	case lo == 1 && math.IsInf(hi, 1):
		want = "a positive number"
	case !math.IsInf(lo, -1) && !math.IsInf(hi, 1):
		want = fmt.Sprintf("%d..%d", int64(lo), int64(hi))
	}
	return apierr.BadRequest(fmt.Sprintf("%s %q: want %s", p.Name, apierr.Short(v), want))
}

// MustParse is Parse of a document known to be valid (embedded, and
// checked by the tests); it panics on an invalid one.
func MustParse(doc []byte) Contract {
	c, err := Parse(doc)
	if err != nil {
		panic(err)
	}
	return c
}

// Serve answers GET of the document doc itself.
func Serve(doc []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(doc)
	}
}
