package pool_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/fault"
	"github.com/dubflow/dubflow/pkg/pool"
)

func TestParse(t *testing.T) {
	doc := `{"reset_hour": 8, "reset_zone": "Asia/Shanghai", "engines": [
		{"name": "a", "kind": "openai", "base_url": "http://a", "api_key_env": "KEY_A", "daily_quota": 100, "rpm": 60},
		{"kind": "apertium", "fallback": true}]}`
	lookup := func(k string) string { return map[string]string{"KEY_A": "secret"}[k] }
	file := filepath.Join(t.TempDir(), "pool.json")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{doc, file} {
		c, err := pool.Parse(value, pool.Kinds["translate"], lookup)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := c.Engines[0], c.Engines[1]; a.APIKey != "secret" || a.Weight != 1 || b.Name != "apertium" || !b.Fallback {
			t.Errorf("engines %+v", c.Engines)
		}
		// 08:00 in Shanghai is 00:00 UTC.
		now := time.Date(2026, 11, 28, 23, 59, 0, 0, time.UTC)
		if got := c.WindowStart(now).UTC(); !got.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("window start %s", got)
		}
	}
	for _, bad := range []string{
		`{"engines": []}`,
		`{"engines": [{"kind": "espeak"}]}`,
		`{"engines": [{"name": "x", "kind": "apy"}, {"name": "x", "kind": "apy"}]}`,
		`{"reset_hour": 24, "engines": [{"kind": "apy"}]}`,
		`{"engines": [{"kind": "apy", "rpm": -1}]}`,
		`{"engines": [{"kind": "apy", "quota": 5}]}`,
		`/no/such/file.json`,
	} {
		if _, err := pool.Parse(bad, pool.Kinds["translate"], nil); err == nil || !fault.IsPermanent(err) || !strings.Contains(err.Error(), "pool") {
			t.Errorf("%s: %v, want a permanent pool error", bad, err)
		}
	}
}
