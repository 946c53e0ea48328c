package uploads

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/dubflow/dubflow/pkg/testenv"
	"github.com/dubflow/dubflow/services/console/internal/apierr"
	"github.com/google/uuid"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, 2)) }

// TestAKeyNamesItsTaskAndProject: an upload's key is read back as its
// task and project (the default project's without one); anything else is
// a 400.
func TestAKeyNamesItsTaskAndProject(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	for key, project := range map[string]string{Key("acme", id): "acme", Prefix + id.String() + "/source.mp4": "default"} {
		got, p, err := TaskOf(key)
		if err != nil || got != id || p != project {
			t.Errorf("%s: %s %s %v, want %s of %s", key, got, p, err, id, project)
		}
	}
	for _, key := range []string{"videos/" + id.String() + "/source.mp4", Prefix + "acme/" + id.String() + "/other.mp4",
		Prefix + "Bad Project/" + id.String() + "/source.mp4", Prefix + "acme/nope/source.mp4", "uploads/stray"} {
		if _, _, err := TaskOf(key); err == nil {
			t.Errorf("%s was read as an upload", key)
		}
	}
}

func TestAnUploadIsAVideo(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]string{"": DefaultType, "video/webm": "video/webm", "image/png": "", "video/mp4; x=1": ""} {
		got, err := ContentType(ct)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("%q: %q %v, want %q", ct, got, err, want)
		}
	}
}

// TestOneRequestTakesAnUploadAtATime: while a request holds an upload's
// lock another is refused 409; once it lets go, the next takes it.
func TestOneRequestTakesAnUploadAtATime(t *testing.T) {
	t.Parallel()
	u := Store{Pool: testenv.Postgres(t).Pool, Log: zerolog.Nop(), Expiry: func() time.Duration { return time.Minute }}
	ctx := context.Background()
	id := uuid.New()
	unlock, err := u.Lock(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Lock(ctx, id); err == nil {
		t.Fatal("a second lock of the same upload was granted")
	} else if ae, ok := apierr.As(err); !ok || ae.Status != http.StatusConflict {
		t.Fatalf("a second lock: %v, want a 409", err)
	}
	unlock()
	again, err := u.Lock(ctx, id)
	if err != nil {
		t.Fatalf("after the unlock: %v", err)
	}
	again()
	if d := u.Deadline(); d != time.Minute+Margin {
		t.Fatalf("deadline %s, want the policy's minute and the margin", d)
	}
	now := time.Now()
	if u.Expired(now.Add(-u.Deadline()), now) != nil || u.Expired(now.Add(-u.Deadline()-time.Second), now) == nil {
		t.Fatal("an upload is expired only past its deadline")
	}
}
