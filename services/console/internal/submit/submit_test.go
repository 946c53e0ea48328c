package submit

import (
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/dubflow/dubflow/services/console/internal/contract"
	"github.com/dubflow/dubflow/services/console/internal/jsonbody"
)

// TestBodyLimit: a multipart upload may carry MAX_VIDEO_BYTES and its
// fields, a task's JSON its text fields, any other body 1 MiB.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	s := Room{Limits: config.Limits{MaxVideoBytes: 1000}}
	form := &contract.Op{BodyTypes: []string{"multipart/form-data", "application/json"}}
	r := httptest.NewRequest("POST", "/api/tasks", nil)
	r.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	if got := s.BodyLimit(form, r); got != 1000+4*maxFieldBytes {
		t.Errorf("multipart: %d", got)
	}
	r.Header.Set("Content-Type", "application/json")
	if got := s.BodyLimit(form, r); got != MaxTaskJSONBytes {
		t.Errorf("a task's JSON: %d, want %d", got, MaxTaskJSONBytes)
	}
	if got := s.BodyLimit(nil, httptest.NewRequest("POST", "/api/uploads", nil)); got != jsonbody.MaxBytes {
		t.Errorf("another body: %d, want %d", got, jsonbody.MaxBytes)
	}
}

// TestRefusalAnswersAnAdmissionsKind: too large is 413, unavailable 503,
// anything else admit refuses 400, with admit's text; another error as it
// is.
func TestRefusalAnswersAnAdmissionsKind(t *testing.T) {
	t.Parallel()
	for kind, want := range map[admit.Kind]int{admit.TooLarge: 413, admit.Unavailable: 503, admit.Invalid: 400} {
		e := &admit.Error{Kind: kind, Field: "video", Reason: "no"}
		if err := Refusal(e); apierr.StatusOf(err) != want || err.Error() != e.Error() {
			t.Errorf("kind %v: %v (%d), want %d", kind, err, apierr.StatusOf(err), want)
		}
	}
	plain := errors.New("x")
	if Refusal(plain) != plain {
		t.Error("a plain error was changed")
	}
}

// TestFormRefusesUnknownFieldsAndLongOnes: a form field the API does not
// know is 400 naming the known ones; a field over its bound is 413.
func TestFormRefusesUnknownFieldsAndLongOnes(t *testing.T) {
	t.Parallel()
	s := Room{Limits: config.Limits{MaxVideoBytes: 1 << 20}}
	for field, want := range map[string]int{"colour": http.StatusBadRequest, "glossary": http.StatusRequestEntityTooLarge} {
		var b strings.Builder
		mw := multipart.NewWriter(&b)
		_ = mw.WriteField(field, strings.Repeat("x", maxFieldBytes+1))
		_ = mw.Close()
		_, _, err := s.readForm(multipart.NewReader(strings.NewReader(b.String()), mw.Boundary()), t.TempDir()+"/v")
		if apierr.StatusOf(err) != want || (want == 400 && !strings.Contains(err.Error(), formFieldNames)) {
			t.Errorf("%s: %v, want %d", field, err, want)
		}
	}
}
