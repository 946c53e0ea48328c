package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
)

// FuzzDecode checks that Decode never panics, rejects only with an
// *InvalidError, and that whatever it accepts encodes to a message it
// accepts again as the same envelope.
func FuzzDecode(f *testing.F) {
	for _, ex := range examples(f) {
		f.Add(ex.body)
	}
	f.Add([]byte(`{"task_id":"550e8400-e29b-41d4-a716-446655440000","step":"waiting_enqueue","attempt":1,` +
		`"trace_id":"t<&>","created_at":"2024-01-01T12:00:00.5+08:00","payload":{"a":["<\u2028>"]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := wire.Decode(body)
		if err != nil {
			var ie *wire.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("rejected with %T %v, want an *InvalidError", err, err)
			}
			return
		}
		again, err := env.Marshal()
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := wire.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded message rejected: %v\n%s", err, again)
		}
		assertSameEnvelope(t, env, back)
	})
}

func BenchmarkDecode(b *testing.B) {
	for _, ex := range examples(b) {
		if messageKind(ex.name) != "envelope" || strings.HasPrefix(ex.name, "invalid_") {
			continue
		}
		b.Run(ex.name, func(b *testing.B) {
			b.SetBytes(int64(len(ex.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := wire.Decode(ex.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
