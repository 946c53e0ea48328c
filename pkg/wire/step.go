package wire

import "strings"

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

// Exchange and routing keys other than the steps' own.
const (
	// Exchange is the durable topic exchange every message goes through.
	Exchange = "task_exchange"
	// RoutingKeyDLQ routes dead letters (DeadLetter) to task.dlq.
	RoutingKeyDLQ = "task.dlq"
	// RoutingKeyTTSCompensation routes Compensation messages.
	RoutingKeyTTSCompensation = "task.tts_compensation"
	// EventPrefix starts the routing key of every integrator event.
	EventPrefix = "event."
)

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
		return "waiting." + action
	}
	return "task." + step
}

// Previous returns the dubbing step that must have succeeded before step may
// run, or "" for the first step and for steps outside the pipeline.
func Previous(step string) string {
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
