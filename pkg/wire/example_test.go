package wire_test

import (
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/google/uuid"
)

func ExampleDecode() {
	body := []byte(`{"task_id": "550e8400-e29b-41d4-a716-446655440000", "step": "asr", "attempt": 1,
		"trace_id": "trace-123456", "created_at": "2024-01-01T12:00:00Z",
		"payload": {"audio_key": "audios/550e8400-e29b-41d4-a716-446655440000/../../etc/passwd",
		            "language": "zh", "output_key": "asr/550e8400-e29b-41d4-a716-446655440000/asr.json"}}`)
	_, err := wire.Decode(body)
	var invalid *wire.InvalidError
	fmt.Println(errors.As(err, &invalid), err)
	// Output: true payload.audio_key: must not contain '..'
}

func ExampleEnvelope_Next() {
	taskID := uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")
	keys := wire.DefaultKeys(taskID)
	in, err := wire.New(wire.StepExtractAudio, taskID, "trace-123456", wire.ExtractAudio{
		SourceVideoKey: keys.SourceVideo,
		OutputAudioKey: keys.SourceAudio,
	})
	if err != nil {
		panic(err)
	}
	out, err := in.Next(wire.StepASR, wire.ASR{AudioKey: keys.SourceAudio, Language: "en", OutputKey: keys.ASR})
	if err != nil {
		panic(err)
	}
	fmt.Println(out.RoutingKey(), out.Attempt, out.TraceID, string(out.Payload))
	// Output: task.asr 1 trace-123456 {"audio_key":"audios/550e8400-e29b-41d4-a716-446655440000/source.wav","language":"en","output_key":"asr/550e8400-e29b-41d4-a716-446655440000/asr.json"}
}

func ExampleCheckKey() {
	taskID := uuid.MustParse("550e8400-e29b-41d4-a716-446655440000")
	fmt.Println(wire.CheckKey("videos/550e8400-e29b-41d4-a716-446655440000/source.mp4", wire.KindVideo, taskID))
	fmt.Println(wire.CheckKey("videos/7c9e6679-7425-40de-944b-e07fc1f90ae7/source.mp4", wire.KindVideo, taskID))
	// Output:
	// <nil>
	// key: must start with "videos/550e8400-e29b-41d4-a716-446655440000/"
}
