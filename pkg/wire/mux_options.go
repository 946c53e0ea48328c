package wire

// MuxOptions are one task's settings for the dub's sound and subtitles
// (mux_video's payload field "options"); a field left out falls back to
// mux_video's configuration.
type MuxOptions struct {
	// BackgroundMode is "duck", "reduce_center" or "none".
	BackgroundMode string `json:"background_mode,omitempty"`
	// BackgroundDuckDB lowers the soundtrack under speech (-60..0 dB).
	BackgroundDuckDB *float64 `json:"background_duck_db,omitempty"`
	// LoudnessLUFS is the dub track's integrated loudness (-40..-5).
	LoudnessLUFS *float64 `json:"loudness_lufs,omitempty"`
	// BurnSubtitles draws the target subtitles into the picture.
	BurnSubtitles *bool `json:"burn_subtitles,omitempty"`
}
