package main

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// tooManyLogins answers 429 with Retry-After in whole seconds.
func tooManyLogins(w http.ResponseWriter, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	writeJSON(w, http.StatusTooManyRequests, &apiError{Code: "rate_limited",
		Message: "too many login attempts from this address; retry after " + strconv.Itoa(max(secs, 1)) + " s"})
}
