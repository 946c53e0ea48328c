package config

import (
	"errors"
	"time"
)

// Limits bound what the media workers (extract_audio, asr, mux_video)
// accept from untrusted uploads. They are enforced while reading and
// decoding: a download is counted as it arrives and stopped at its limit,
// ffmpeg stops decoding or writing a little past MaxVideoSeconds, and the
// length checked is the decoded one, never only what a file claims.
type Limits struct {
	// MaxVideoSeconds is the longest video (and extracted audio) accepted.
	MaxVideoSeconds int `env:"MAX_VIDEO_SECONDS" envDefault:"3600"`
	// MaxVideoBytes is the largest source video downloaded.
	MaxVideoBytes int64 `env:"MAX_VIDEO_BYTES" envDefault:"4294967296"`
	// MaxAudioBytes is the largest extracted audio object asr downloads (an
	// hour of 16 kHz mono 16-bit PCM is 115 MB).
	MaxAudioBytes int64 `env:"MAX_AUDIO_BYTES" envDefault:"1073741824"`
	// MaxClipBytes is the largest synthesized segment clip mux_video
	// downloads.
	MaxClipBytes int64 `env:"MAX_CLIP_BYTES" envDefault:"67108864"`
}

// Validate checks that every limit is positive.
func (l *Limits) Validate() error {
	return errors.Join(AtLeast("MAX_VIDEO_SECONDS", l.MaxVideoSeconds, 1), AtLeast("MAX_VIDEO_BYTES", l.MaxVideoBytes, 1),
		AtLeast("MAX_AUDIO_BYTES", l.MaxAudioBytes, 1), AtLeast("MAX_CLIP_BYTES", l.MaxClipBytes, 1))
}

// TranslateBatch is how many segments one translate message carries: asr
// fans a transcript out in batches of this size and translate sends each
// batch to its engine in one call. Both read it here, so they agree.
type TranslateBatch struct {
	TranslateBatchSize int `env:"TRANSLATE_BATCH_SIZE" envDefault:"20"`
}

// Validate checks the batch size.
func (t *TranslateBatch) Validate() error {
	return Between("TRANSLATE_BATCH_SIZE", t.TranslateBatchSize, 1, 1000)
}

// MaxDuration is MaxVideoSeconds as a duration.
func (l *Limits) MaxDuration() time.Duration { return time.Duration(l.MaxVideoSeconds) * time.Second }
