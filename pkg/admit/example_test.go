package admit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/google/uuid"
)

// dubctl submit, with a database: load what the engines can do, check the
// flags, then the local file, and only then upload and create the task.
// (Through the console, dubctl runs the same Check without capabilities —
// nil judges no engine — and Media; the console then judges the engines.)
func Example() {
	ctx := context.Background()
	// caps, err := admit.LoadCapabilities(ctx, pool) — here, as announced:
	caps := admit.Capabilities{
		{Step: "asr", Worker: "asr-1", Engine: "pocketsphinx", Languages: []string{"en"}, SeenAt: time.Now()},
		{Step: "translate", Worker: "translate-1", Engine: "apertium", Languages: []string{"en|ca", "en|es"}, SeenAt: time.Now()},
	}
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: caps}

	_, err := admit.Check(admit.Request{Targets: []string{"es,xx"}}, rules)
	e, _ := admit.As(err)
	fmt.Println(err)
	fmt.Println(e.Kind) // exit 2 in dubctl, 400 in the console

	t, err := admit.Check(admit.Request{Source: "en", Targets: []string{"es,ca"},
		Glossary: "source,target\ndubflow,\nqueue,cola\n"}, rules)
	fmt.Println(t.Targets, len(t.Glossary), err)

	lim := admit.Limits{MaxBytes: 4 << 30, MaxSeconds: 3600}
	if _, err := lim.Media(ctx, "/no/such/file.mp4"); err != nil {
		fmt.Println(err)
	}
	p := t.Payload(uuid.MustParse("00000000-0000-0000-0000-000000000001"))
	fmt.Println(p.SourceVideoKey, p.TargetLanguage, p.TargetLanguages)
	// Output:
	// target "xx": no translation from en to xx (installed: en→ca, en→es)
	// invalid
	// [es ca] 2 <nil>
	// video: cannot read the file
	// videos/00000000-0000-0000-0000-000000000001/source.mp4 es [es ca]
}
