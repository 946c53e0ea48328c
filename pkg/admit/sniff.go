package admit

import (
	"bytes"
	"errors"
	"io"
	"os"
)

// File checks the video in the local file path without ffprobe: a
// regular file, not empty, at most MaxBytes, that starts as a media
// container does (Container). It is what a door checks when it is told
// not to run ffprobe (dubctl submit --no-validate): a text file, an image
// or random bytes are refused there too, before anything is uploaded or
// created; what is inside the container is for the workers to judge.
func (l Limits) File(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &Error{Field: "video", Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return &Error{Field: "video", Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return refuse("video", "", "not a regular file")
	}
	if err := l.Size(fi.Size()); err != nil {
		return err
	}
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return &Error{Field: "video", Reason: "cannot read the file", Kind: Invalid, Err: err}
	}
	if !Container(head[:n]) {
		return refuse("video", "", "not a media container dubflow knows (MP4, MOV, MKV, WebM, AVI, MPEG-TS, MPEG-PS, "+
			"FLV, WMV, Ogg, MXF); without --no-validate ffprobe judges it")
	}
	return nil
}

// sniffBytes is how much of a file Container reads: three MPEG-TS packets
// of the 192-byte kind.
const sniffBytes = 3 * 192

// Container reports whether head, the start of a file, is the start of a
// media container that can hold video and audio: ISO base media (MP4,
// MOV, 3GP, M4V), Matroska and WebM, AVI, MPEG transport (188- and
// 192-byte packets) and program streams, FLV, ASF (WMV), Ogg and MXF.
func Container(head []byte) bool {
	at := func(off int, sig string) bool {
		return len(head) >= off+len(sig) && string(head[off:off+len(sig)]) == sig
	}
	switch {
	case len(head) >= 8 && isoBox(head[4:8]):
		return true
	case at(0, "\x1a\x45\xdf\xa3"), // Matroska, WebM
		at(0, "RIFF") && at(8, "AVI "),
		at(0, "FLV\x01"),
		at(0, "\x30\x26\xb2\x75\x8e\x66\xcf\x11"), // ASF
		at(0, "\x00\x00\x01\xba"),                 // MPEG program stream
		at(0, "OggS"),
		at(0, "\x06\x0e\x2b\x34"): // MXF
		return true
	}
	return transportStream(head, 188, 0) || transportStream(head, 192, 4)
}

// isoBox reports whether t is the type of a box an ISO base media file (or
// an old QuickTime one) starts with.
func isoBox(t []byte) bool {
	for _, b := range []string{"ftyp", "moov", "mdat", "free", "skip", "wide", "pnot"} {
		if bytes.Equal(t, []byte(b)) {
			return true
		}
	}
	return false
}

// transportStream reports whether head holds MPEG-TS packets of size
// bytes, the sync byte 0x47 at off of each (at least two seen).
func transportStream(head []byte, size, off int) bool {
	seen := 0
	for i := off; i < len(head); i += size {
		if head[i] != 0x47 {
			return false
		}
		seen++
	}
	return seen >= 2
}
