package admit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/admit"
	"github.com/dubflow/dubflow/pkg/config"
	"github.com/google/uuid"
)

// dubctl submit with a database: load what the engines can do, check the
// flags, then the local file, and only then upload and create the task.
// Through the console, dubctl runs the same Check with nil Capabilities
// (it has no database; nil judges no engine) and Media, and the console
// judges the engines again.
func Example() {
	ctx := context.Background()
	// caps, err := admit.LoadCapabilities(ctx, pool) — here, as announced:
	caps := admit.Capabilities{
		{Step: "asr", Worker: "asr-1", Engine: "pocketsphinx", Languages: []string{"en"}, SeenAt: time.Now()},
		{Step: "translate", Worker: "translate-1", Engine: "apertium", Languages: []string{"en|ca", "en|es"}, SeenAt: time.Now()},
	}
	rules := admit.Rules{DefaultSource: "en", DefaultTarget: "es", Capabilities: caps}

	glossary, _ := admit.GlossaryFile("") // --glossary FILE; "" for none
	_, err := admit.Check(admit.Request{Source: "", Targets: []string{"es,xx"}, Glossary: glossary}, rules)
	e, _ := admit.As(err)
	fmt.Println(err)
	fmt.Println(e.Kind) // exit 2 in dubctl (1 for Unavailable), 400 in the console

	t, err := admit.Check(admit.Request{Source: "en", Targets: []string{"es,ca"},
		Glossary: "source,target\ndubflow,\nqueue,cola\n"}, rules)
	fmt.Println(t.Targets, len(t.Glossary), err)

	lim := admit.LimitsOf(config.Limits{MaxVideoBytes: 4 << 30, MaxVideoSeconds: 3600})
	if _, err := lim.Media(ctx, "/no/such/file.mp4"); err != nil {
		fmt.Println(err)
	}
	// The payload to submit (task.Submit), the glossary in it.
	p := t.Payload(uuid.MustParse("00000000-0000-0000-0000-000000000001"))
	fmt.Println(p.SourceVideoKey, p.TargetLanguage, p.TargetLanguages, len(p.Glossary))
	// Output:
	// target "xx": no translation from en to xx (installed: en→ca, en→es)
	// invalid
	// [es ca] 2 <nil>
	// video: cannot read the file
	// videos/00000000-0000-0000-0000-000000000001/source.mp4 es [es ca] 2
}
