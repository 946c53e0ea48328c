package speech

import (
	"context"
	"testing"
)

func TestDecodeSlotsSizes(t *testing.T) {
	for _, c := range []struct{ size, cores, all, plain, niced int }{
		{3, 2, 3, 2, 2}, // the default: one more than the cores
		{1, 2, 1, 1, 1},
		{2, 2, 2, 2, 1},
		{5, 2, 5, 2, 2},
		{3, 4, 3, 3, 2},
		{0, 0, 1, 1, 1},
	} {
		s := newDecodeSlots(c.size, c.cores)
		if cap(s.all) != c.all || cap(s.plain) != c.plain || cap(s.niced) != c.niced {
			t.Errorf("newDecodeSlots(%d, %d): all %d plain %d niced %d, want %d %d %d", c.size, c.cores,
				cap(s.all), cap(s.plain), cap(s.niced), c.all, c.plain, c.niced)
		}
	}
}

// On two cores with three decoders: two plain decodes at once, a third
// waits; a Yielding one still starts beside them, and a second Yielding
// one waits for the third decoder without keeping a slot of its kind.
func TestDecodeSlotsAdmit(t *testing.T) {
	s := newDecodeSlots(3, 2)
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()

	var releases []func()
	admit := func(ctx context.Context, niced bool) error {
		release, err := s.acquire(ctx, niced)
		if err == nil {
			releases = append(releases, release)
		}
		return err
	}
	for i := range 2 {
		if err := admit(bg, false); err != nil {
			t.Fatalf("plain decode %d: %v", i+1, err)
		}
	}
	if err := admit(done, false); err == nil {
		t.Fatal("a third plain decode started beside two on two cores")
	}
	if err := admit(bg, true); err != nil {
		t.Fatalf("a Yielding decode beside two plain ones: %v", err)
	}
	if err := admit(done, true); err == nil {
		t.Fatal("a fourth decode started in a pool of three")
	}
	if len(s.all) != 3 || len(s.plain) != 2 || len(s.niced) != 1 {
		t.Fatalf("slots held: all %d plain %d niced %d, want 3 2 1 (a refused decode gives back what it took)",
			len(s.all), len(s.plain), len(s.niced))
	}
	releases[0]()
	if err := admit(bg, false); err != nil {
		t.Fatalf("a plain decode after one ended: %v", err)
	}
	for _, release := range releases[1:] {
		release()
	}
	if len(s.all)+len(s.plain)+len(s.niced) != 0 {
		t.Fatalf("slots held after every decode ended: all %d plain %d niced %d", len(s.all), len(s.plain), len(s.niced))
	}
}

// Long recordings' chunks leave a decoder to a short task: here, of two
// decoders on two cores, one.
func TestDecodeSlotsKeepOneForShortTasks(t *testing.T) {
	s := newDecodeSlots(2, 2)
	bg := context.Background()
	done, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.acquire(bg, true); err != nil {
		t.Fatalf("Yielding decode: %v", err)
	}
	if _, err := s.acquire(done, true); err == nil {
		t.Fatal("a second Yielding decode took the decoder kept for short tasks")
	}
	if _, err := s.acquire(bg, false); err != nil {
		t.Fatalf("a plain decode beside two Yielding ones: %v", err)
	}
}
