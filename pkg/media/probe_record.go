package media

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// ProbeRecordMaxBytes is the largest file RecordProbe records: hashing a
// file twice (when recorded and when reused, ~1.4 GB/s each) must cost
// less than the ffprobe start it saves (~0.24 CPU-s of loading libraries).
const ProbeRecordMaxBytes = 64 << 20

// ProbeRecord is a probe kept for another process to reuse: what Probe
// found, with the size and SHA-256 of the bytes it probed, so that it is
// reused only for the same content, whatever its path or object key, and
// the ffprobe that probed them, so that it is reused only where the same
// ffprobe would say the same (a door on another machine may have another).
type ProbeRecord struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	Prober string `json:"prober"`
	Info   Info   `json:"info"`
}

// prober names the ffprobe this process runs (ProberID).
var prober = sync.OnceValue(func() string {
	path, err := exec.LookPath("ffprobe")
	if err != nil {
		return ""
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(real)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", real, fi.Size(), fi.ModTime().Unix())
})

// ProberID names the ffprobe this process runs, without starting it: its
// resolved path, size and modification time (a package's update changes
// them); "" when there is none. It is read once per process.
func ProberID() string { return prober() }

// RecordProbe records info, path's probe, for Reuse. It returns nil (and
// no error) for a file larger than ProbeRecordMaxBytes: probing it again
// costs less than hashing it.
func RecordProbe(path string, info *Info) (*ProbeRecord, error) {
	size, sum, err := hashFile(path, ProbeRecordMaxBytes)
	if err != nil || sum == "" {
		return nil, err
	}
	return &ProbeRecord{Size: size, SHA256: sum, Prober: ProberID(), Info: *info}, nil
}

// RecordProbeJSON is RecordProbe's record as JSON, the form a task row
// keeps it in (tasks.source_probe); nil for a file too large to record.
func RecordProbeJSON(path string, info *Info) ([]byte, error) {
	rec, err := RecordProbe(path, info)
	if err != nil || rec == nil {
		return nil, err
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode the probe of %s: %w", path, err)
	}
	return raw, nil
}

// ProbeReusing describes path and checks it against lim as ProbeInput
// does, with the recorded probe (RecordProbeJSON's, possibly empty) when it
// is one of these bytes by this ffprobe (Reuse) instead of starting
// ffprobe; reused says which. A record it cannot read or apply is ignored.
func ProbeReusing(ctx context.Context, path string, recorded []byte, lim Limits) (info *Info, reused bool, err error) {
	if rec, err := ParseProbeRecord(recorded); err == nil {
		if info, err := rec.Reuse(path); err == nil && info != nil {
			return info, true, info.Check(lim)
		}
	}
	info, err = ProbeInput(ctx, path, lim)
	return info, false, err
}

// ParseProbeRecord decodes a ProbeRecord's JSON; empty or null is nil.
func ParseProbeRecord(raw []byte) (*ProbeRecord, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var r ProbeRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decode probe record: %w", err)
	}
	return &r, nil
}

// Reuse returns the recorded probe as path's when path holds the bytes
// that were probed (same size and SHA-256) by the ffprobe this process
// runs (ProberID), else nil: the caller probes. A nil record reuses
// nothing.
func (r *ProbeRecord) Reuse(path string) (*Info, error) {
	if r == nil || r.SHA256 == "" || r.Prober == "" || r.Prober != ProberID() {
		return nil, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() != r.Size {
		return nil, nil
	}
	_, sum, err := hashFile(path, r.Size)
	if err != nil || sum != r.SHA256 {
		return nil, err
	}
	info := r.Info
	info.Path = path
	info.Streams = append([]Stream(nil), r.Info.Streams...)
	return &info, nil
}

// hashFile returns the size and hex SHA-256 of path, or an empty sum when
// it is larger than limit.
func hashFile(path string, limit int64) (int64, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, "", err
	}
	if fi.Size() > limit {
		return fi.Size(), "", nil
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, "", fmt.Errorf("hash %s: %w", path, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
