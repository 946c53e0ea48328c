package api

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// openapiDoc is the part of openapi.json the checks read.
type openapiDoc struct {
	Paths map[string]map[string]struct {
		Security    *[]any `json:"security"`
		Parameters  []param
		RequestBody *struct {
			Content map[string]any `json:"content"`
		} `json:"requestBody"`
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"paths"`
	Components struct {
		Responses map[string]json.RawMessage `json:"responses"`
	} `json:"components"`
}

type param struct {
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Maximum *int `json:"maximum"`
		Default *int `json:"default"`
	} `json:"schema"`
}

// TestOpenAPIMatchesTheRoutes: openapi.json lists exactly the routes
// served, with the query parameters, bodies and error statuses each
// route's guard gives it.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	var doc openapiDoc
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	served := map[string]bool{}
	for _, rt := range (&Server{}).Routes() {
		key := rt.Method + " " + rt.Path
		served[key] = true
		op, ok := doc.Paths[rt.Path][strings.ToLower(rt.Method)]
		if !ok {
			t.Errorf("%s is served but not in openapi.json", key)
			continue
		}
		checkParameters(t, key, rt, op.Parameters)
		if (op.RequestBody != nil) != rt.Body {
			t.Errorf("%s: request body documented %v, read %v", key, op.RequestBody != nil, rt.Body)
		}
		if public := op.Security != nil && len(*op.Security) == 0; public != rt.Public {
			t.Errorf("%s: documented public %v, served public %v", key, public, rt.Public)
		}
		for status, need := range map[string]bool{"400": true, "401": !rt.Public, "413": true, "415": rt.Body} {
			if _, ok := op.Responses[status]; ok != need {
				t.Errorf("%s: response %s documented %v, answered %v", key, status, ok, need)
			}
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !served[strings.ToUpper(method)+" "+path] {
				t.Errorf("%s %s is in openapi.json but not served", strings.ToUpper(method), path)
			}
		}
	}
	for _, name := range []string{"MethodNotAllowed", "NotFound"} {
		if _, ok := doc.Components.Responses[name]; !ok {
			t.Errorf("components.responses.%s missing: every path answers it", name)
		}
	}
}

// checkParameters compares a route's documented parameters with what it
// takes: the query parameters (limit with its bound and default) and the
// path's names.
func checkParameters(t *testing.T, key string, rt Route, params []param) {
	t.Helper()
	var query []string
	for _, p := range params {
		switch {
		case p.In == "query" && p.Name == "limit":
			if p.Schema.Maximum == nil || *p.Schema.Maximum != rt.Limit || p.Schema.Default == nil || *p.Schema.Default != rt.Limit {
				t.Errorf("%s: limit documented up to %v (default %v), served up to %d", key, p.Schema.Maximum, p.Schema.Default, rt.Limit)
			}
			query = append(query, "limit")
		case p.In == "query":
			query = append(query, p.Name)
		case p.In == "path" && !strings.Contains(rt.Path, "{"+p.Name+"}"):
			t.Errorf("%s: documents path parameter %s it does not have", key, p.Name)
		}
	}
	want := slices.Clone(rt.Query)
	if rt.Limit > 0 {
		want = append(want, "limit")
	}
	slices.Sort(query)
	slices.Sort(want)
	if !slices.Equal(query, want) {
		t.Errorf("%s: query parameters documented %v, served %v", key, query, want)
	}
}

func TestCleanPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/queue/entries/x": true, "/queue/entries/": true,
		"/queue/entries/..": false, "/queue/./entries": false, "/queue//entries": false,
		"/queue/entries/../staff/x": false, "": false, "queue": false,
	} {
		if got := cleanPath(p); got != want {
			t.Errorf("cleanPath(%q) = %v, want %v", p, got, want)
		}
	}
}
