package main

import (
	_ "embed"
	"net/http"

	"github.com/dubflow/dubflow/services/console/internal/contract"
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

// apiContract is openapi.json's, read once.
var apiContract = func() contract.Contract {
	c, err := contract.Parse(openapiDoc)
	if err != nil {
		panic(err) // the embedded document is checked by the tests
	}
	return c
}()
