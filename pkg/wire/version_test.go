package wire_test

import (
	"testing"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

func TestVersionParts(t *testing.T) {
	id := uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")
	for _, tc := range []struct {
		version        int
		part, out, dub string
		segment        string
	}{
		{0, "", "outputs/" + id.String() + "/final.mp4", "tts/" + id.String() + "/dub.wav",
			"tts/" + id.String() + "/seg-000003.wav"},
		{1, "", "outputs/" + id.String() + "/final.mp4", "tts/" + id.String() + "/dub.wav",
			"tts/" + id.String() + "/seg-000003.wav"},
		{2, "v2", "outputs/" + id.String() + "/v2/final.mp4", "tts/" + id.String() + "/v2/dub.wav",
			"tts/" + id.String() + "/v2/seg-000003.wav"},
	} {
		env, err := wire.New(wire.StepTTS, id, "", wire.TTS{TaskID: id, Version: tc.version})
		if err != nil {
			t.Fatal(err)
		}
		if part, err := env.Part(); err != nil || part != tc.part {
			t.Errorf("tts version %d: part %q (%v), want %q", tc.version, part, err, tc.part)
		}
		k := wire.VersionKeys(id, tc.version)
		mux, err := wire.New(wire.StepMuxVideo, id, "", wire.MuxVideo{TaskID: id, Version: tc.version,
			SourceVideoKey: k.SourceVideo, TTSAudioKey: k.DubAudio, OutputVideoKey: k.OutputVideo})
		if err != nil {
			t.Fatal(err)
		}
		if part, err := mux.Part(); err != nil || part != tc.part {
			t.Errorf("mux version %d: part %q (%v), want %q", tc.version, part, err, tc.part)
		}
		if k.OutputVideo != tc.out || k.DubAudio != tc.dub {
			t.Errorf("version %d: keys %+v", tc.version, k)
		}
		seg := wire.SegmentVersionKey(id, 3, tc.version)
		if seg != tc.segment {
			t.Errorf("version %d: segment key %q, want %q", tc.version, seg, tc.segment)
		}
		for _, key := range []string{k.OutputVideo, k.DubAudio, seg} {
			kind := wire.KindTTS
			if key == k.OutputVideo {
				kind = wire.KindOutput
			}
			if err := wire.CheckKey(key, kind, id); err != nil {
				t.Errorf("version %d: %s: %v", tc.version, key, err)
			}
		}
	}
}
