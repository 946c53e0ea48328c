package main

import (
	_ "embed"
	"net/http"
)

// openapiDoc is the API's OpenAPI document, written by hand; a test keeps
// its paths and methods equal to the routes served.
//
//go:embed openapi.json
var openapiDoc []byte

func (s *server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(openapiDoc)
}
