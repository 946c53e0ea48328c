package wire_test

import (
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// TestPeekHeadKeepsWhatTheContractAccepts: the head of a message that is no
// valid envelope is read field by field, each kept only when the contract
// accepts it.
func TestPeekHeadKeepsWhatTheContractAccepts(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	for _, c := range []struct {
		name, body string
		want       wire.Head
		ok         bool
	}{
		{"a whole head", `{"task_id":"` + id.String() + `","step":"asr","attempt":2,"trace_id":"t-1","payload":7}`,
			wire.Head{TaskID: id, Step: "asr", Attempt: 2, TraceID: "t-1"}, true},
		{"an unknown step", `{"task_id":"` + id.String() + `","step":"nowhere","attempt":1}`,
			wire.Head{TaskID: id, Attempt: 1}, true},
		{"an attempt out of range", `{"task_id":"` + id.String() + `","attempt":1001}`, wire.Head{TaskID: id}, true},
		{"a trace with a control character", `{"task_id":"` + id.String() + `","trace_id":"a\u001bb"}`, wire.Head{TaskID: id}, true},
		{"a task id that is no UUID", `{"task_id":"x","step":"tts"}`, wire.Head{Step: "tts"}, true},
		{"not an object", `[1,2]`, wire.Head{}, false},
		{"not JSON", `task`, wire.Head{}, false},
		{"too large", `{"task_id":"` + id.String() + `","pad":"` + strings.Repeat("x", wire.MaxMessageBytes) + `"}`, wire.Head{}, false},
	} {
		got, ok := wire.PeekHead([]byte(c.body))
		if got != c.want || ok != c.ok {
			t.Errorf("%s: PeekHead = %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
