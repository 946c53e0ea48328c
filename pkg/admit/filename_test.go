package admit_test

import (
	"strings"
	"testing"

	"github.com/dubflow/dubflow/pkg/admit"
)

// TestCleanFileName: a kept file name is the path's last element, without
// control characters, bidirectional overrides or surrounding spaces, at most MaxFileNameBytes of
// valid UTF-8; Check fills it in.
func TestCleanFileName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 200) + ".mp4"
	for in, want := range map[string]string{
		"talk.mp4":                   "talk.mp4",
		"/home/me/videos/talk.mp4":   "talk.mp4",
		`C:\Users\me\Board (v2).mp4`: "Board (v2).mp4",
		"  spaced name.mp4 \n":       "spaced name.mp4",
		"bell\x07and\x00nul.mp4":     "bellandnul.mp4",
		"bad\xffutf8.mp4":            "badutf8.mp4",
		"invoice\u202egpj.exe":       "invoicegpj.exe", // a right-to-left override would show "exe.jpg"
		"dir/":                       "",
		"":                           "",
		long:                         strings.Repeat("é", admit.MaxFileNameBytes/2),
	} {
		if got := admit.CleanFileName(in); got != want {
			t.Errorf("CleanFileName(%q) = %q, want %q", in, got, want)
		}
	}
	task, err := admit.Check(admit.Request{Source: "en", Targets: []string{"es"}, FileName: "/tmp/x/Demo.MP4"}, admit.Rules{})
	if err != nil || task.FileName != "Demo.MP4" {
		t.Fatalf("Check kept file name %q (%v), want Demo.MP4", task.FileName, err)
	}
}
