package media

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// WAVFormat is the format of a PCM WAV stream.
type WAVFormat struct {
	SampleRate    int
	Channels      int
	BitsPerSample int
}

// frameBytes is the size of one sample frame (all channels).
func (f WAVFormat) frameBytes() int { return f.Channels * f.BitsPerSample / 8 }

// ErrNotWAV is returned for input that is not a PCM WAV stream.
var ErrNotWAV = errors.New("not a PCM WAV stream")

const (
	wavFormatPCM        = 1
	wavFormatExtensible = 0xFFFE
	// wavUnknownSize is the data size streaming writers put when the length
	// is not known in advance (ffmpeg writing to a pipe, for example).
	wavUnknownSize = 0xFFFFFFFF
	wavHeaderSize  = 44
)

// WAVReader streams the samples of a 16-bit PCM WAV file without loading it.
type WAVReader struct {
	r io.Reader
	// Format is the stream's format.
	Format WAVFormat
	// Frames is the number of sample frames announced by the header, or -1
	// when the header does not know (a WAV written to a pipe).
	Frames    int64
	remaining int64 // data bytes left; -1 when unknown
	buf       []byte
}

// NewWAVReader reads the RIFF header of r up to the start of the sample
// data. Only integer PCM is accepted; ReadSamples needs 16-bit samples.
func NewWAVReader(r io.Reader) (*WAVReader, error) {
	var riff [12]byte
	if _, err := io.ReadFull(r, riff[:]); err != nil {
		return nil, fmt.Errorf("read RIFF header: %w", errors.Join(ErrNotWAV, err))
	}
	if string(riff[0:4]) != "RIFF" || string(riff[8:12]) != "WAVE" {
		return nil, fmt.Errorf("read RIFF header: %w", ErrNotWAV)
	}
	w := &WAVReader{r: r}
	haveFmt := false
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, fmt.Errorf("read WAV chunk header: %w", errors.Join(ErrNotWAV, err))
		}
		id, size := string(hdr[0:4]), binary.LittleEndian.Uint32(hdr[4:8])
		switch id {
		case "fmt ":
			if size < 16 || size > 1024 {
				return nil, fmt.Errorf("fmt chunk of %d bytes: %w", size, ErrNotWAV)
			}
			body := make([]byte, size+size%2)
			if _, err := io.ReadFull(r, body); err != nil {
				return nil, fmt.Errorf("read fmt chunk: %w", errors.Join(ErrNotWAV, err))
			}
			tag := binary.LittleEndian.Uint16(body[0:2])
			if tag == wavFormatExtensible && size >= 26 {
				tag = binary.LittleEndian.Uint16(body[24:26]) // sub-format GUID starts with the tag
			}
			if tag != wavFormatPCM {
				return nil, fmt.Errorf("WAV format tag %#x: %w", tag, ErrNotWAV)
			}
			w.Format = WAVFormat{
				Channels:      int(binary.LittleEndian.Uint16(body[2:4])),
				SampleRate:    int(binary.LittleEndian.Uint32(body[4:8])),
				BitsPerSample: int(binary.LittleEndian.Uint16(body[14:16])),
			}
			if w.Format.Channels < 1 || w.Format.SampleRate < 1 || w.Format.BitsPerSample%8 != 0 || w.Format.BitsPerSample == 0 {
				return nil, fmt.Errorf("WAV format %+v: %w", w.Format, ErrNotWAV)
			}
			haveFmt = true
		case "data":
			if !haveFmt {
				return nil, fmt.Errorf("data chunk before fmt chunk: %w", ErrNotWAV)
			}
			w.remaining, w.Frames = int64(size), int64(size)/int64(w.Format.frameBytes())
			if size == wavUnknownSize || size == 0 {
				w.remaining, w.Frames = -1, -1
			}
			return w, nil
		default:
			if _, err := io.CopyN(io.Discard, r, int64(size)+int64(size%2)); err != nil {
				return nil, fmt.Errorf("skip WAV chunk %q: %w", id, errors.Join(ErrNotWAV, err))
			}
		}
	}
}

// Duration is the announced length of the stream, or -1 when unknown.
func (w *WAVReader) Duration() time.Duration {
	if w.Frames < 0 {
		return -1
	}
	return framesToDuration(w.Frames, w.Format.SampleRate)
}

// ReadSamples reads up to len(dst) 16-bit samples (interleaved when there
// is more than one channel) and returns how many it read. At the end of the
// data it returns 0, io.EOF.
func (w *WAVReader) ReadSamples(dst []int16) (int, error) {
	if w.Format.BitsPerSample != 16 {
		return 0, fmt.Errorf("read %d-bit samples as 16-bit: %w", w.Format.BitsPerSample, ErrNotWAV)
	}
	if w.remaining == 0 || len(dst) == 0 {
		if w.remaining == 0 {
			return 0, io.EOF
		}
		return 0, nil
	}
	want := int64(len(dst) * 2)
	if w.remaining > 0 && want > w.remaining {
		want = w.remaining &^ 1
		if want == 0 {
			w.remaining = 0
			return 0, io.EOF
		}
	}
	if int64(cap(w.buf)) < want {
		w.buf = make([]byte, want)
	}
	buf := w.buf[:want]
	n, err := io.ReadAtLeast(w.r, buf, 2)
	n &^= 1 // whole samples; a dangling odd byte ends the stream
	for i := 0; i < n/2; i++ {
		dst[i] = int16(binary.LittleEndian.Uint16(buf[2*i:]))
	}
	if w.remaining > 0 {
		w.remaining -= int64(n)
	}
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if w.remaining > 0 {
			w.remaining = 0
			if n == 0 {
				return 0, fmt.Errorf("read WAV data: %w", io.ErrUnexpectedEOF)
			}
		}
		w.remaining = 0
		if n == 0 {
			return 0, io.EOF
		}
		return n / 2, nil
	case err != nil:
		return n / 2, fmt.Errorf("read WAV data: %w", err)
	}
	return n / 2, nil
}

// WAVWriter writes a 16-bit PCM WAV stream incrementally; Close patches the
// sizes in the header, so the destination must be seekable.
type WAVWriter struct {
	ws     io.WriteSeeker
	bw     *bufio.Writer
	format WAVFormat
	bytes  int64
	buf    []byte
	closed bool
}

// maxWAVData is the largest data chunk a RIFF size field can describe.
const maxWAVData = math.MaxUint32 - wavHeaderSize

// NewWAVWriter writes a provisional header to ws and returns a writer of
// 16-bit samples at sampleRate with the given channel count.
func NewWAVWriter(ws io.WriteSeeker, sampleRate, channels int) (*WAVWriter, error) {
	if sampleRate < 1 || channels < 1 {
		return nil, fmt.Errorf("new WAV writer: bad format %d Hz, %d channels", sampleRate, channels)
	}
	w := &WAVWriter{
		ws:     ws,
		bw:     bufio.NewWriterSize(ws, 64<<10),
		format: WAVFormat{SampleRate: sampleRate, Channels: channels, BitsPerSample: 16},
		buf:    make([]byte, 32<<10),
	}
	if _, err := w.bw.Write(w.header()); err != nil {
		return nil, fmt.Errorf("write WAV header: %w", err)
	}
	return w, nil
}

func (w *WAVWriter) header() []byte {
	h := make([]byte, wavHeaderSize)
	f := w.format
	copy(h[0:], "RIFF")
	binary.LittleEndian.PutUint32(h[4:], uint32(36+w.bytes))
	copy(h[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(h[16:], 16)
	binary.LittleEndian.PutUint16(h[20:], wavFormatPCM)
	binary.LittleEndian.PutUint16(h[22:], uint16(f.Channels))
	binary.LittleEndian.PutUint32(h[24:], uint32(f.SampleRate))
	binary.LittleEndian.PutUint32(h[28:], uint32(f.SampleRate*f.frameBytes()))
	binary.LittleEndian.PutUint16(h[32:], uint16(f.frameBytes()))
	binary.LittleEndian.PutUint16(h[34:], 16)
	copy(h[36:], "data")
	binary.LittleEndian.PutUint32(h[40:], uint32(w.bytes))
	return h
}

// Format is the format being written.
func (w *WAVWriter) Format() WAVFormat { return w.format }

// Frames is the number of sample frames written so far.
func (w *WAVWriter) Frames() int64 { return w.bytes / int64(w.format.frameBytes()) }

// WriteSamples appends interleaved 16-bit samples.
func (w *WAVWriter) WriteSamples(s []int16) error {
	for len(s) > 0 {
		n := min(len(s), len(w.buf)/2)
		for i, v := range s[:n] {
			binary.LittleEndian.PutUint16(w.buf[2*i:], uint16(v))
		}
		if err := w.write(w.buf[:2*n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// WriteSilence appends frames sample frames of digital silence.
func (w *WAVWriter) WriteSilence(frames int64) error {
	clear(w.buf)
	left := frames * int64(w.format.frameBytes())
	for left > 0 {
		n := min(left, int64(len(w.buf)))
		if err := w.write(w.buf[:n]); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

func (w *WAVWriter) write(p []byte) error {
	if w.closed {
		return errors.New("write WAV: writer closed")
	}
	if w.bytes+int64(len(p)) > maxWAVData {
		return fmt.Errorf("write WAV: data exceeds %d bytes", int64(maxWAVData))
	}
	if _, err := w.bw.Write(p); err != nil {
		return fmt.Errorf("write WAV data: %w", err)
	}
	w.bytes += int64(len(p))
	return nil
}

// Close flushes buffered samples and patches the header sizes. It does not
// close the underlying writer.
func (w *WAVWriter) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("flush WAV: %w", err)
	}
	if _, err := w.ws.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("seek WAV header: %w", err)
	}
	if _, err := w.ws.Write(w.header()); err != nil {
		return fmt.Errorf("patch WAV header: %w", err)
	}
	if _, err := w.ws.Seek(0, io.SeekEnd); err != nil {
		return fmt.Errorf("seek WAV end: %w", err)
	}
	return nil
}

// framesToDuration converts a sample frame count at rate to a duration.
func framesToDuration(frames int64, rate int) time.Duration {
	return time.Duration(frames * int64(time.Second) / int64(rate))
}

// msToFrames converts milliseconds to sample frames at rate.
func msToFrames(ms int64, rate int) int64 { return ms * int64(rate) / 1000 }
