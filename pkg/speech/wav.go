package speech

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// ErrNotWAV is wrapped by functions given bytes that are not a PCM WAV file.
var ErrNotWAV = errors.New("not a PCM WAV file")

// wavFormat is the part of a WAV header the engines need.
type wavFormat struct {
	SampleRate    int
	Channels      int
	BitsPerSample int
	// DataSize is the declared size of the data chunk in bytes; streaming
	// writers leave it 0 or 0xFFFFFFFF, so treat it as an upper bound.
	DataSize int64
}

// bytesPerSecond is the data rate of the format.
func (f wavFormat) bytesPerSecond() int {
	return f.SampleRate * f.Channels * f.BitsPerSample / 8
}

// readWAVHeader reads a RIFF/WAVE header from r, skipping chunks other than
// fmt and data (LIST, fact, ...), and leaves r at the first data byte.
func readWAVHeader(r io.Reader) (wavFormat, error) {
	var f wavFormat
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return f, fmt.Errorf("read RIFF header: %w", ErrNotWAV)
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return f, fmt.Errorf("missing RIFF/WAVE magic: %w", ErrNotWAV)
	}
	haveFmt := false
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return f, fmt.Errorf("no data chunk: %w", ErrNotWAV)
		}
		id := string(hdr[0:4])
		size := int64(binary.LittleEndian.Uint32(hdr[4:8]))
		switch id {
		case "fmt ":
			if size < 16 || size > 1<<16 {
				return f, fmt.Errorf("fmt chunk of %d bytes: %w", size, ErrNotWAV)
			}
			b := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, b); err != nil {
				return f, fmt.Errorf("read fmt chunk: %w", ErrNotWAV)
			}
			format := binary.LittleEndian.Uint16(b[0:2])
			if format != 1 && format != 0xFFFE { // PCM, or extensible (PCM in practice)
				return f, fmt.Errorf("audio format %d: %w", format, ErrNotWAV)
			}
			f.Channels = int(binary.LittleEndian.Uint16(b[2:4]))
			f.SampleRate = int(binary.LittleEndian.Uint32(b[4:8]))
			f.BitsPerSample = int(binary.LittleEndian.Uint16(b[14:16]))
			if f.Channels == 0 || f.SampleRate == 0 || f.BitsPerSample == 0 || f.BitsPerSample%8 != 0 {
				return f, fmt.Errorf("fmt chunk %d ch, %d Hz, %d bit: %w", f.Channels, f.SampleRate, f.BitsPerSample, ErrNotWAV)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return f, fmt.Errorf("data chunk before fmt: %w", ErrNotWAV)
			}
			f.DataSize = size
			if size == 0 || size == 0xFFFFFFFF {
				f.DataSize = -1 // unknown: read to the end
			}
			return f, nil
		default:
			if _, err := io.CopyN(io.Discard, r, size+size%2); err != nil {
				return f, fmt.Errorf("skip %q chunk: %w", id, ErrNotWAV)
			}
		}
	}
}

// wavHeader returns a 44-byte PCM WAV header for dataSize bytes of samples.
func wavHeader(sampleRate, channels, bits int, dataSize int) []byte {
	b := make([]byte, 44)
	copy(b[0:], "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(36+dataSize))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], uint16(channels))
	binary.LittleEndian.PutUint32(b[24:], uint32(sampleRate))
	binary.LittleEndian.PutUint32(b[28:], uint32(sampleRate*channels*bits/8))
	binary.LittleEndian.PutUint16(b[32:], uint16(channels*bits/8))
	binary.LittleEndian.PutUint16(b[34:], uint16(bits))
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(dataSize))
	return b
}

// WAVDuration returns the playing time of a PCM WAV file held in memory.
// A data size that streaming writers leave unset (0 or 0xFFFFFFFF) or that
// overstates the bytes present is replaced by what is actually there.
func WAVDuration(wav []byte) (time.Duration, error) {
	r := bytes.NewReader(wav)
	f, err := readWAVHeader(r)
	if err != nil {
		return 0, err
	}
	n := int64(r.Len())
	if f.DataSize >= 0 && f.DataSize < n {
		n = f.DataSize
	}
	return time.Duration(n) * time.Second / time.Duration(f.bytesPerSecond()), nil
}

// silentWAV returns a 16 kHz mono 16-bit WAV of d of silence.
func silentWAV(d time.Duration) []byte {
	const rate = 16000
	n := int(d * rate / time.Second)
	if n < 0 {
		n = 0
	}
	return append(wavHeader(rate, 1, 16, 2*n), make([]byte, 2*n)...)
}
