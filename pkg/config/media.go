package config

// MediaTools is how a media worker runs ffmpeg and ffprobe.
type MediaTools struct {
	// FFmpegZygote picks the fork server library (media.UseZygote): empty
	// uses libffzygote.so when it lies next to the program, "off" starts
	// every ffmpeg and ffprobe as a new process, a path names the library.
	FFmpegZygote string `env:"FFMPEG_ZYGOTE"`
}
