package wire

import (
	"fmt"
	"strings"
	"time"
)

// Step names, as carried in the envelope's step field.
const (
	StepExtractAudio = "extract_audio"
	StepASR          = "asr"
	StepTranslate    = "translate"
	StepTTS          = "tts"
	StepMuxVideo     = "mux_video"

	// The waiting-queue dispatcher's steps, routed as waiting.<action>.
	StepWaitingEnqueue  = "waiting_enqueue"
	StepWaitingProcess  = "waiting_process"
	StepWaitingCancel   = "waiting_cancel"
	StepWaitingCapacity = "waiting_capacity"
)

// The broker's names: the exchange, the queues and their routing keys.
// This is the one place that names them; pkg/broker declares them and every
// service uses them from here. Each work queue is bound to Exchange under
// the routing key of the same name, RoutingKey(step).
const (
	// Exchange is the durable topic exchange every message goes through.
	Exchange = "task_exchange"

	// QueueExtractAudio is the extract_audio work queue and its routing key.
	QueueExtractAudio = taskPrefix + StepExtractAudio
	// QueueASR is the asr work queue and its routing key.
	QueueASR = taskPrefix + StepASR
	// QueueTranslate is the translate work queue and its routing key.
	QueueTranslate = taskPrefix + StepTranslate
	// QueueTTS is the tts work queue and its routing key.
	QueueTTS = taskPrefix + StepTTS
	// QueueMuxVideo is the mux_video work queue and its routing key.
	QueueMuxVideo = taskPrefix + StepMuxVideo

	// QueueWaiting is the dispatcher's queue, bound with BindingWaiting.
	QueueWaiting = "task.waiting_queue"
	// BindingWaiting is the binding pattern of QueueWaiting: every
	// "waiting.<action>" routing key.
	BindingWaiting = waitingPrefix + "*"

	// QueueDLQ is the dead-letter queue. Work queues dead-letter into it
	// through the default exchange; it is also bound to Exchange under its
	// own name, so services may publish dead letters (DeadLetter) to either.
	QueueDLQ = "task.dlq"
	// RoutingKeyDLQ routes dead letters to QueueDLQ.
	RoutingKeyDLQ = QueueDLQ
	// QueueTTSCompensation is the queue of tts segments whose synthesis
	// still failed after all retries (Compensation messages); it is bound to
	// Exchange under its own name.
	QueueTTSCompensation = "task.tts_compensation"
	// RoutingKeyTTSCompensation routes Compensation messages.
	RoutingKeyTTSCompensation = QueueTTSCompensation

	// EventPrefix starts the routing key of every integrator event
	// ("event.task.succeeded"). Integrators bind their own queues; the one
	// declared here is dubflow's own, QueueStreamEnd.
	EventPrefix = "event."

	// QueueStreamEnd is mux_video's own queue of integrator events, bound
	// to Exchange under StreamEndKeys: mux_video ends the stored stream of
	// each task that failed or was cancelled (pkg/stream's End). Named
	// after its consumer, not "task.…": it is no work queue, and policies
	// for the work queues ("^task\.") leave it alone.
	QueueStreamEnd = "mux_video.stream_end"

	// DelayPrefix starts the name of every delay tier's exchange and queue
	// (DelayQueue).
	DelayPrefix = "task.delay."

	taskPrefix    = "task."
	waitingPrefix = "waiting."
)

// DelayQueue returns the name of the delay exchange and queue of a tier:
// task.delay.<seconds>s.
func DelayQueue(tier time.Duration) string {
	return fmt.Sprintf("%s%ds", DelayPrefix, int64(tier/time.Second))
}

// StepOfQueue returns the dubbing step whose work queue is queue
// ("task.asr" → "asr"), or "" when queue is not one of WorkQueues.
func StepOfQueue(queue string) string {
	for i, q := range WorkQueues {
		if q == queue {
			return Pipeline[i]
		}
	}
	return ""
}

// StreamEndKeys are the routing keys QueueStreamEnd is bound with: the
// events of a task that failed or was cancelled.
var StreamEndKeys = []string{EventPrefix + EventTaskFailed, EventPrefix + EventTaskCancelled}

// WorkQueues lists the five work queues of the dubbing chain in order.
var WorkQueues = []string{QueueExtractAudio, QueueASR, QueueTranslate, QueueTTS, QueueMuxVideo}

// Pipeline lists the dubbing steps in the order they run.
var Pipeline = []string{StepExtractAudio, StepASR, StepTranslate, StepTTS, StepMuxVideo}

// Steps lists every step the envelope schema allows, dubbing steps first.
func Steps() []string {
	return []string{
		StepExtractAudio, StepASR, StepTranslate, StepTTS, StepMuxVideo,
		StepWaitingEnqueue, StepWaitingProcess, StepWaitingCancel, StepWaitingCapacity,
	}
}

// RoutingKey returns the routing key a message for step is published under:
// "task.<step>" for the dubbing steps and "waiting.<action>" for the
// dispatcher's waiting_<action> steps. It returns "" for an unknown step.
func RoutingKey(step string) string {
	if !knownStep(step) {
		return ""
	}
	if action, ok := strings.CutPrefix(step, "waiting_"); ok {
		return waitingPrefix + action
	}
	return taskPrefix + step
}

// Previous returns the dubbing step that must have succeeded before step may
// run, or "" for the first step and for steps outside the pipeline.
//
// Translate has none: each of its messages is emitted by the asr part
// (one chunk of the audio) that staged the segments it names, in the same
// transaction, so its input exists when it does — and translation starts
// while later chunks are still being transcribed. The fan-in that follows
// (tts) waits for both steps.
func Previous(step string) string {
	if step == StepTranslate {
		return ""
	}
	for i, s := range Pipeline {
		if s == step && i > 0 {
			return Pipeline[i-1]
		}
	}
	return ""
}

func knownStep(step string) bool {
	for _, s := range Steps() {
		if s == step {
			return true
		}
	}
	return false
}
