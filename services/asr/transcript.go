package main

import (
	"github.com/dubflow/dubflow/pkg/speech"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

// transcript is the stored asr.json: the recognised segments with their
// words, times in seconds (as Whisper's verbose_json) and milliseconds.
type transcript struct {
	TaskID   uuid.UUID           `json:"task_id"`
	Language string              `json:"language"`
	Segments []transcriptSegment `json:"segments"`
}

type transcriptSegment struct {
	ID      string           `json:"id"`
	Idx     int              `json:"idx"`
	Start   float64          `json:"start"`
	End     float64          `json:"end"`
	StartMS int              `json:"start_ms"`
	EndMS   int              `json:"end_ms"`
	Text    string           `json:"text"`
	Words   []transcriptWord `json:"words"`
}

type transcriptWord struct {
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Word       string  `json:"word"`
	Confidence float64 `json:"confidence"`
}

// newTranscript is the transcript of segs, numbered from base.
func newTranscript(taskID uuid.UUID, language string, segs []speech.Segment, base int) transcript {
	t := transcript{TaskID: taskID, Language: language, Segments: make([]transcriptSegment, 0, len(segs))}
	for i, s := range segs {
		ts := transcriptSegment{ID: wire.SegmentID(base + i), Idx: base + i, Start: seconds(s.StartMS), End: seconds(s.EndMS),
			StartMS: s.StartMS, EndMS: s.EndMS, Text: s.Text, Words: make([]transcriptWord, 0, len(s.Words))}
		for _, w := range s.Words {
			ts.Words = append(ts.Words, transcriptWord{Start: seconds(w.StartMS), End: seconds(w.EndMS),
				Word: w.Text, Confidence: w.Confidence})
		}
		t.Segments = append(t.Segments, ts)
	}
	return t
}

func seconds(ms int) float64 { return float64(ms) / 1000 }
