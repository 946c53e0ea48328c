package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// MaxMessageBytes is the largest envelope, compensation message or event
// accepted.
const MaxMessageBytes = 1 << 20

// MaxDeadLetterBytes is the largest dead letter accepted: room for a
// MaxMessageBytes original in base64 and the failure's details.
const MaxDeadLetterBytes = 2 << 20

// Decode parses and validates a task envelope: its size, its JSON syntax,
// the envelope schema, the payload schema of its step and the rules no
// schema expresses (each object key under its kind and the task's own
// prefix, a payload task_id equal to the envelope's). Every rejection is an
// *InvalidError. Unknown top-level fields are ignored, except those that
// differ from a known field only in case.
func Decode(body []byte) (*Envelope, error) {
	reg, doc, err := parse(body, MaxMessageBytes)
	if err != nil {
		return nil, err
	}
	if err := reg.validate(schemaEnvelope, doc, ""); err != nil {
		return nil, err
	}
	obj := doc.(map[string]any)
	if err := checkCase(obj, envelopeFields()); err != nil {
		return nil, err
	}
	step := obj["step"].(string)
	if err := reg.validate(step, obj["payload"], "payload"); err != nil {
		return nil, err
	}
	var e Envelope
	if err := unmarshal(body, &e, "created_at"); err != nil {
		return nil, err
	}
	if newPayload, ok := payloadTypes[step]; ok {
		p := newPayload()
		if err := unmarshal(e.Payload, p, ""); err != nil {
			return nil, err.at("payload")
		}
		if err := p.check(e.TaskID); err != nil {
			return nil, err.at("payload")
		}
	}
	return &e, nil
}

// DecodeDeadLetter parses and validates a dead letter from task.dlq.
func DecodeDeadLetter(body []byte) (*DeadLetter, error) {
	return decodeAs[DeadLetter](body, MaxDeadLetterBytes, schemaDeadLetter, "failed_at")
}

// DecodeCompensation parses and validates a message from
// task.tts_compensation.
func DecodeCompensation(body []byte) (*Compensation, error) {
	return decodeAs[Compensation](body, MaxMessageBytes, schemaCompensation, "created_at")
}

// DecodeEvent parses and validates an integrator event.
func DecodeEvent(body []byte) (*Event, error) {
	return decodeAs[Event](body, MaxMessageBytes, schemaEvent, "occurred_at")
}

// Marshal encodes the dead letter as JSON, its failure reason made clean
// text (CleanText).
func (d *DeadLetter) Marshal() ([]byte, error) {
	c := *d
	c.FailureReason = CleanText(c.FailureReason)
	return marshal(&c)
}

// Marshal encodes the compensation message as JSON, its error made clean
// text (CleanText).
func (c *Compensation) Marshal() ([]byte, error) {
	m := *c
	m.Error = CleanText(m.Error)
	return marshal(&m)
}

// Marshal encodes the event as JSON, its error made clean text (CleanText).
// An event without an EventID gets a fresh one first.
func (e *Event) Marshal() ([]byte, error) {
	if e.EventID == uuid.Nil {
		e.EventID = uuid.New()
	}
	c := *e
	c.Error = CleanText(c.Error)
	return marshal(&c)
}

// decodeAs parses body (at most limit bytes), validates it against schema,
// refuses field names in another case than T's, and decodes it into a new
// T; a time that does not parse is reported at timeField.
func decodeAs[T any](body []byte, limit int, schema, timeField string) (*T, error) {
	reg, doc, err := parse(body, limit)
	if err != nil {
		return nil, err
	}
	if err := reg.validate(schema, doc, ""); err != nil {
		return nil, err
	}
	if err := checkCase(doc.(map[string]any), jsonFields(reflect.TypeFor[T]())); err != nil {
		return nil, err
	}
	v := new(T)
	if err := unmarshal(body, v, timeField); err != nil {
		return nil, err
	}
	return v, nil
}

// parse checks the size of body and parses it as JSON for the validator.
func parse(body []byte, limit int) (*registry, any, error) {
	if len(body) > limit {
		return nil, nil, invalid("", fmt.Sprintf("message is %d bytes, limit %d", len(body), limit))
	}
	reg, err := schemas()
	if err != nil {
		return nil, nil, fmt.Errorf("load wire schemas: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, nil, invalid("", "not JSON: "+err.Error())
	}
	return reg, doc, nil
}

// unmarshal decodes schema-valid JSON into v. The schemas leave little to
// fail here: a number with a fraction or exponent where Go wants an int, or
// a timestamp the schema's date-time accepts and time.Time does not (a leap
// second).
func unmarshal(data []byte, v any, timeField string) *InvalidError {
	err := json.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &te):
		return invalid(te.Field, fmt.Sprintf("must be %s, not %s", goTypeText(te.Type), te.Value))
	case errors.As(err, &pe):
		return invalid(timeField, "not an RFC 3339 date-time like 2024-01-01T12:00:00Z")
	}
	return invalid("", err.Error())
}

func goTypeText(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return t.String()
}

// checkCase refuses top-level keys that differ from a known field only in
// case: encoding/json would match them to that field although the schema,
// being case-sensitive, never checked them.
func checkCase(obj map[string]any, known []string) *InvalidError {
	var bad []problem
	for k := range obj {
		for _, name := range known {
			if k != name && strings.EqualFold(k, name) {
				bad = append(bad, problem{k, fmt.Sprintf("differs from %q only in case", name)})
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	first := bad[0]
	for _, p := range bad[1:] {
		if p.field < first.field {
			first = p
		}
	}
	return invalid(first.field, first.reason)
}

var envelopeFields = sync.OnceValue(func() []string { return jsonFields(reflect.TypeOf(Envelope{})) })

// jsonFields returns the JSON names of a struct's fields.
func jsonFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// payload is a step payload that knows the rules its schema cannot express.
type payload interface {
	check(taskID uuid.UUID) *InvalidError
}

// payloadTypes maps the dubbing steps to their payload types. Steps without
// an entry (the dispatcher's) are checked by their schema only.
var payloadTypes = map[string]func() payload{
	StepExtractAudio: func() payload { return new(ExtractAudio) },
	StepASR:          func() payload { return new(ASR) },
	StepTranslate:    func() payload { return new(Translate) },
	StepTTS:          func() payload { return new(TTS) },
	StepMuxVideo:     func() payload { return new(MuxVideo) },
}

func (p *ExtractAudio) check(taskID uuid.UUID) *InvalidError {
	if err := p.checkTargets(); err != nil {
		return err
	}
	keys := []keyField{{"source_video_key", p.SourceVideoKey, KindVideo}, {"output_audio_key", p.OutputAudioKey, KindAudio}}
	switch {
	case p.SubtitlesKey != "":
		keys = append(keys, keyField{"subtitles_key", p.SubtitlesKey, KindSubtitles})
	case p.SubtitlesLanguage != "":
		return invalid("subtitles_language", "is the language of subtitles_key, which is missing")
	case p.SourceSubtitlesKey != "":
		return invalid("source_subtitles_key", "gives the source text of subtitles_key, which is missing")
	}
	if p.SourceSubtitlesKey != "" {
		keys = append(keys, keyField{"source_subtitles_key", p.SourceSubtitlesKey, KindSubtitles})
	}
	return checkKeys(taskID, keys...)
}

func (p *ASR) check(taskID uuid.UUID) *InvalidError {
	if p.Merge && p.Chunk != nil {
		return invalid("merge", "a merge message names no chunk")
	}
	return checkKeys(taskID,
		keyField{"audio_key", p.AudioKey, KindAudio},
		keyField{"output_key", p.OutputKey, KindASR})
}

func (p *Translate) check(taskID uuid.UUID) *InvalidError {
	return sameTask(p.TaskID, taskID)
}

func (p *TTS) check(taskID uuid.UUID) *InvalidError {
	return sameTask(p.TaskID, taskID)
}

func (p *MuxVideo) check(taskID uuid.UUID) *InvalidError {
	if err := sameTask(p.TaskID, taskID); err != nil {
		return err
	}
	return checkKeys(taskID,
		keyField{"source_video_key", p.SourceVideoKey, KindVideo},
		keyField{"tts_audio_key", p.TTSAudioKey, KindTTS},
		keyField{"output_video_key", p.OutputVideoKey, KindOutput})
}

type keyField struct{ name, key, kind string }

func checkKeys(taskID uuid.UUID, keys ...keyField) *InvalidError {
	for _, k := range keys {
		if err := CheckKey(k.key, k.kind, taskID); err != nil {
			var ie *InvalidError
			errors.As(err, &ie)
			return invalid(k.name, ie.Reason)
		}
	}
	return nil
}

func sameTask(payloadTask, taskID uuid.UUID) *InvalidError {
	if payloadTask != taskID {
		return invalid("task_id", fmt.Sprintf("%s is not the envelope's task_id %s", payloadTask, taskID))
	}
	return nil
}
