package apierr

import (
	"strings"
	"testing"
)

func TestCapEchoes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 150)
	for in, want := range map[string]string{
		`task id "abc": want a UUID`:          `task id "abc": want a UUID`,
		`task id "` + long + `": want a UUID`: `task id "` + long[:200] + `…": want a UUID`,
		`no such API route: GET /api/` + long: `no such API route: GET /api/` + long[:2*(100-len("/api/"))] + `…`,
		`a "quote \" inside" stays`:           `a "quote \" inside" stays`,
		strings.Repeat("word ", 300):          strings.Repeat("word ", 200) + "…",
	} {
		if got := CapEchoes(in); got != want {
			t.Errorf("CapEchoes(%.60q…) = %.300q, want %.300q", in, got, want)
		}
	}
}
