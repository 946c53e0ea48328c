package contract

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/services/console/internal/apierr"
)

// doc is a small document: one operation with a path UUID, an integer
// and an enum in the query, a JSON body, and an error answer by $ref.
const doc = `{"paths": {"/t/{id}": {"post": {
  "x-scope": "project",
  "parameters": [{"$ref": "#/components/parameters/Id"},
    {"in": "query", "name": "limit", "schema": {"type": "integer", "minimum": 1, "maximum": 10}},
    {"in": "query", "name": "kind", "schema": {"type": "string", "enum": ["a", "b"]}}],
  "requestBody": {"required": true, "content": {"application/json": {}}},
  "responses": {"200": {}, "400": {"$ref": "#/components/responses/Bad"}}}}},
 "components": {
  "parameters": {"Id": {"in": "path", "name": "id", "required": true, "schema": {"type": "string", "format": "uuid"}}},
  "responses": {"Bad": {"content": {"application/json": {"schema": {"properties": {"code": {"enum": ["bad_request"]}}}}}}}}}`

func TestParseReadsTheOperations(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	op := c["POST /t/{id}"]
	if op == nil || op.Scope != ScopeProject || strings.Join(op.Query, ",") != "kind,limit" || op.Params["id"].Format != "uuid" ||
		!op.BodyRequired || strings.Join(op.BodyTypes, ",") != "application/json" || fmt.Sprint(op.Errors) != "map[400:[bad_request]]" {
		t.Fatalf("operation %+v", op)
	}
	for name, bad := range map[string]string{
		"a dangling parameter": strings.Replace(doc, `"Id": {`, `"Other": {`, 1),
		"a dangling response":  strings.Replace(doc, `"Bad": {`, `"Other": {`, 1),
		"an unknown scope":     strings.Replace(doc, `"x-scope": "project"`, `"x-scope": "team"`, 1),
		"a default answer":     strings.Replace(doc, `"200": {}`, `"default": {}`, 1),
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
}

// TestCheckRequestRefusesWhatTheDocumentDoesNotSay: unknown or repeated
// query parameters, values outside their type, bounds or enum, a body of
// another type or too large, are refused with the API's answers.
func TestCheckRequestRefusesWhatTheDocumentDoesNotSay(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	id := "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	for _, tc := range []struct {
		path, query, ctype, body string
		want                     int
	}{
		{id, "limit=3&kind=a", "application/json", "{}", 0},
		{id, "", "application/json", "", 0},
		{"nope", "", "application/json", "{}", http.StatusBadRequest},
		{"00000000-0000-0000-0000-000000000000", "", "application/json", "{}", http.StatusBadRequest},
		{id, "limit=11", "application/json", "{}", http.StatusBadRequest},
		{id, "limit=1&limit=2", "application/json", "{}", http.StatusBadRequest},
		{id, "kind=c", "application/json", "{}", http.StatusBadRequest},
		{id, "other=1", "application/json", "{}", http.StatusBadRequest},
		{id, "%zz", "application/json", "{}", http.StatusBadRequest},
		{id, "", "text/plain", "{}", http.StatusUnsupportedMediaType},
		{id, "", "application/json", strings.Repeat(" ", 65), http.StatusRequestEntityTooLarge},
	} {
		r := httptest.NewRequest("POST", "/t/"+tc.path+"?"+tc.query, strings.NewReader(tc.body))
		r.Header.Set("Content-Type", tc.ctype)
		r.SetPathValue("id", tc.path)
		err := c["POST /t/{id}"].CheckRequest(httptest.NewRecorder(), r, 64)
		got := 0
		if ae, ok := apierr.As(err); ok {
			got = ae.Status
		} else if err != nil {
			got = -1
		}
		if got != tc.want {
			t.Errorf("%s?%s (%s, %d bytes): %d %v, want %d", tc.path, tc.query, tc.ctype, len(tc.body), got, err, tc.want)
		}
	}
}
