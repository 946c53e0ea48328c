//go:build !linux

package media

// setNice does nothing where processes' niceness is not set this way.
func setNice(pid, nice int) error { return nil }
