package speech

// The temporary files of the engines are named like the scratch folders of
// the service that runs them ("dubflow-<service>-", the workers' temp
// prefix), so that the service's cleanup at start removes what a killed
// process left behind: the chunk files of the asr service and the
// espeak-ng takes of the tts service.
const (
	chunkFilePattern = "dubflow-asr-chunk-%03d-*.wav"
	espeakDirPattern = "dubflow-tts-espeak-*"
)
