package media

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWAVRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.wav")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWAVWriter(f, 8000, 1)
	if err != nil {
		t.Fatal(err)
	}
	samples := []int16{1, -1, 32767, -32768, 0, 1234}
	if err := w.WriteSamples(samples); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteSilence(7994); err != nil {
		t.Fatal(err)
	}
	if w.Frames() != 8000 {
		t.Errorf("frames %d, want 8000", w.Frames())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	r := readWAV(t, path)
	if r.Format != (WAVFormat{SampleRate: 8000, Channels: 1, BitsPerSample: 16}) || r.Frames != 8000 || r.Duration() != time.Second {
		t.Fatalf("header: %+v frames %d duration %v", r.Format, r.Frames, r.Duration())
	}
	got := readAll(t, r, 100)
	if len(got) != 8000 {
		t.Fatalf("read %d samples, want 8000", len(got))
	}
	if !equal(got[:6], samples) || got[6] != 0 || got[7999] != 0 {
		t.Errorf("samples %v...", got[:8])
	}
	// ffprobe agrees with the header the writer patched.
	info, err := Probe(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Duration != time.Second || info.Streams[0].SampleRate != 8000 || info.Streams[0].Codec != "pcm_s16le" {
		t.Errorf("ffprobe sees %+v", info)
	}
}

// wavBytes builds a WAV by hand: fmt, extra chunks, data with a given size field.
func wavBytes(dataSize uint32, data []byte, extra ...[]byte) []byte {
	var b bytes.Buffer
	b.WriteString("RIFF\x00\x00\x00\x00WAVE")
	for _, e := range extra {
		b.Write(e)
	}
	fmtChunk := make([]byte, 24)
	copy(fmtChunk, "fmt ")
	binary.LittleEndian.PutUint32(fmtChunk[4:], 16)
	binary.LittleEndian.PutUint16(fmtChunk[8:], 1)
	binary.LittleEndian.PutUint16(fmtChunk[10:], 2)
	binary.LittleEndian.PutUint32(fmtChunk[12:], 22050)
	binary.LittleEndian.PutUint32(fmtChunk[16:], 22050*4)
	binary.LittleEndian.PutUint16(fmtChunk[20:], 4)
	binary.LittleEndian.PutUint16(fmtChunk[22:], 16)
	b.Write(fmtChunk)
	b.WriteString("data")
	binary.Write(&b, binary.LittleEndian, dataSize)
	b.Write(data)
	return b.Bytes()
}

func TestWAVReaderChunksAndUnknownSize(t *testing.T) {
	data := []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0}
	list := append([]byte("LIST\x05\x00\x00\x00abcde"), 0) // odd size, padded
	t.Run("skips chunks", func(t *testing.T) {
		r, err := NewWAVReader(bytes.NewReader(wavBytes(uint32(len(data)), data, list)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Format.Channels != 2 || r.Frames != 3 {
			t.Errorf("format %+v frames %d", r.Format, r.Frames)
		}
		if got := readAll(t, r, 4); !equal(got, []int16{1, 2, 3, 4, 5, 6}) {
			t.Errorf("samples %v", got)
		}
	})
	t.Run("streamed header", func(t *testing.T) {
		r, err := NewWAVReader(bytes.NewReader(wavBytes(0xFFFFFFFF, data)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Frames != -1 || r.Duration() != -1 {
			t.Errorf("frames %d duration %v, want unknown", r.Frames, r.Duration())
		}
		if got := readAll(t, r, 5); len(got) != 6 {
			t.Errorf("samples %v", got)
		}
	})
	t.Run("stops at data size", func(t *testing.T) {
		r, err := NewWAVReader(bytes.NewReader(wavBytes(4, data)))
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, r, 100); !equal(got, []int16{1, 2}) {
			t.Errorf("samples %v", got)
		}
	})
	t.Run("short data", func(t *testing.T) {
		r, err := NewWAVReader(bytes.NewReader(wavBytes(100, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadSamples(make([]int16, 10)); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("got %v, want unexpected EOF", err)
		}
	})
}

func TestWAVReaderRejects(t *testing.T) {
	float := wavBytes(4, []byte{0, 0, 0, 0})
	binary.LittleEndian.PutUint16(float[20:], 3) // IEEE float
	for name, b := range map[string][]byte{
		"empty":     nil,
		"text":      []byte("hello, this is text and not audio"),
		"riff only": []byte("RIFF\x00\x00\x00\x00WAVE"),
		"float":     float,
		"no fmt":    []byte("RIFF\x00\x00\x00\x00WAVEdata\x04\x00\x00\x00\x00\x00\x00\x00"),
	} {
		if _, err := NewWAVReader(bytes.NewReader(b)); !errors.Is(err, ErrNotWAV) {
			t.Errorf("%s: got %v, want ErrNotWAV", name, err)
		}
	}
}

func FuzzWAVReader(f *testing.F) {
	f.Add(wavBytes(12, []byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0}))
	f.Add(wavBytes(0xFFFFFFFF, []byte{1, 0, 2}))
	f.Add([]byte("RIFF\x00\x00\x00\x00WAVEfmt \x10\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := NewWAVReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		buf := make([]int16, 7)
		total := 0
		for i := 0; i < len(b); i++ { // every call consumes input or ends
			n, err := r.ReadSamples(buf)
			total += n
			if err != nil {
				break
			}
		}
		if total*2 > len(b) {
			t.Fatalf("read %d samples from %d bytes", total, len(b))
		}
	})
}

func readAll(t *testing.T, r *WAVReader, chunk int) []int16 {
	t.Helper()
	var out []int16
	buf := make([]int16, chunk)
	for {
		n, err := r.ReadSamples(buf)
		out = append(out, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func equal(a, b []int16) bool { return bytes.Equal(int16Bytes(a), int16Bytes(b)) }

func int16Bytes(s []int16) []byte {
	b := make([]byte, 2*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	}
	return b
}
