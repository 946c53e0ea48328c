package setting

import (
	"slices"
	"strings"
)

// Type is what a setting's value holds (system_config.value_type).
type Type string

// Types of values.
const (
	Integer Type = "integer"
	Number  Type = "number"
)

// Keys of the settings. The queue.* and monitoring.* keys are seed 003's;
// the others are dubflow's own.
const (
	// CentralBatchSize is seed 003's central queue batch: the waiting
	// entries one scan of the dispatcher attempts.
	CentralBatchSize = "queue.central_batch_size"
	// ConcurrentWorkers is seed 003's concurrent processors: the entries a
	// dispatcher scan attempts at once.
	ConcurrentWorkers = "queue.concurrent_workers"
	// PendingRetryInterval is seed 003's pending-queue retry interval: the
	// least time between two attempts on one waiting entry.
	PendingRetryInterval = "queue.pending_retry_interval"
	// PendingMaxRetries is seed 003's pending_queue.max_retries: the
	// attempts after which a waiting entry expires.
	PendingMaxRetries = "queue.pending_max_retries"
	// ReservationTimeout is seed 003's service reservation timeout: how
	// long an assignment holds the agent's unit unconfirmed.
	ReservationTimeout = "queue.service_reservation_timeout"
	// StuckTaskThreshold is seed 003's stuck-task alert threshold.
	StuckTaskThreshold = "monitoring.stuck_task_threshold"
	// MetricsRetentionDays is how long the console keeps its metric
	// history.
	MetricsRetentionDays = "monitoring.metrics_retention_days"
	// MaxEngineWaits bounds a part's engine waits (seed 003's pending
	// queue max_retries, for the pipeline).
	MaxEngineWaits = "step.max_engine_waits"
	// TranslateBatchSize is how many segments one translate message
	// carries.
	TranslateBatchSize = "translate.batch_size"
)

// stepWorkers are the services that run the pipeline's steps.
var stepWorkers = []string{"extract_audio", "asr", "translate", "tts", "mux_video"}

// Def is one setting: what it means, what it may hold, where its first
// value comes from and who uses it. Every setting here takes effect in the
// running services within Poll of a change (none waits for a restart).
type Def struct {
	Key         string `json:"key"`
	Category    string `json:"category"`
	Description string `json:"description"`
	Type        Type   `json:"type"`
	// Min and Max bound the value (inclusive).
	Min, Max float64
	// Unit is the value's unit (seconds, days; "" for a count).
	Unit string `json:"unit"`
	// Env names the environment variable whose value (of the service
	// that seeds the key) is the first value; Default is the value when it
	// is not set.
	Env     string `json:"env"`
	Default string `json:"default"`
	// UsedBy names the services that read the setting; each seeds it on
	// its first start.
	UsedBy []string `json:"usedBy"`
}

// Catalogue is every setting, in the order they are listed.
var Catalogue = []Def{
	{Key: CentralBatchSize, Category: "queue", Type: Integer, Min: 10, Max: 200, Env: "QUEUE_PROCESS_BATCH_SIZE", Default: "50",
		UsedBy:      []string{"dispatcher"},
		Description: "Waiting entries one scan of the dispatcher attempts (seed 003's central queue batch); the next scan uses a change."},
	{Key: ConcurrentWorkers, Category: "queue", Type: Integer, Min: 1, Max: 50, Env: "QUEUE_PROCESS_MAX_WORKERS", Default: "5",
		UsedBy: []string{"dispatcher"},
		Description: "Waiting entries a dispatcher scan attempts at once (seed 003's concurrent processors); the next scan uses a change. " +
			"The step workers' consumers (WORKER_CONCURRENCY) are sized per process at its start instead."},
	{Key: PendingRetryInterval, Category: "queue", Type: Number, Min: 0, Max: 86400, Unit: "seconds",
		Env: "QUEUE_PROCESS_RETRY_DELAY_SECONDS", Default: "60", UsedBy: []string{"dispatcher"},
		Description: "Least time between two attempts on one waiting entry (seed 003's pending-queue retry interval)."},
	{Key: PendingMaxRetries, Category: "queue", Type: Integer, Min: 1, Max: 100, Env: "QUEUE_PROCESS_MAX_RETRIES", Default: "3",
		UsedBy:      []string{"dispatcher"},
		Description: "Unsuccessful attempts after which a waiting entry expires (seed 003's pending_queue.max_retries)."},
	{Key: ReservationTimeout, Category: "queue", Type: Number, Min: 0, Max: 3600, Unit: "seconds",
		Env: "QUEUE_RESERVATION_TIMEOUT_SECONDS", Default: "60", UsedBy: []string{"dispatcher"},
		Description: "How long an assignment holds the agent's unit unconfirmed before it expires and the entry waits again " +
			"(seed 003's service reservation timeout); 0 confirms assignments at once. New assignments use a change."},
	{Key: StuckTaskThreshold, Category: "monitoring", Type: Integer, Min: 10, Max: 3600, Unit: "seconds",
		Env: "STUCK_TASK_SECONDS", Default: "600", UsedBy: []string{"reconciler", "console"},
		Description: "A queued or running task with no progress this long is stuck: the health page counts it (and turns degraded), " +
			"and the reconciler checks then whether a part's message was lost (seed 003's stuck-task alert)."},
	{Key: MetricsRetentionDays, Category: "monitoring", Type: Integer, Min: 7, Max: 90, Unit: "days",
		Env: "METRICS_RETENTION_DAYS", Default: "30", UsedBy: []string{"console"},
		Description: "Days the console keeps its metric history (15 s samples for an hour, per minute for a day, per hour beyond); " +
			"the next sample trims to a change."},
	{Key: MaxEngineWaits, Category: "step", Type: Integer, Min: 1, Max: 1000, Env: "STEP_MAX_WAITS", Default: "10",
		UsedBy: stepWorkers,
		Description: "Engine waits (no_quota, rate_limit, no_engine) a part may have in one retry budget: the next wait ends the attempt " +
			"dead-lettered with the reason (seed 003's pending_queue.max_retries, for the pipeline)."},
	{Key: TranslateBatchSize, Category: "translate", Type: Integer, Min: 1, Max: 1000, Env: "TRANSLATE_BATCH_SIZE", Default: "20",
		UsedBy: []string{"asr", "translate"},
		Description: "Segments per translate message (asr's fan-out) and per engine call of a message that names none; " +
			"the next transcript uses a change."},
}

// Lookup returns the setting named key.
func Lookup(key string) (Def, bool) {
	i := slices.IndexFunc(Catalogue, func(d Def) bool { return d.Key == key })
	if i < 0 {
		return Def{}, false
	}
	return Catalogue[i], true
}

// Keys lists every setting's key, comma separated.
func Keys() string {
	keys := make([]string, len(Catalogue))
	for i, d := range Catalogue {
		keys[i] = d.Key
	}
	return strings.Join(keys, ", ")
}

// UsedBy returns the settings service uses.
func UsedBy(service string) []Def {
	var out []Def
	for _, d := range Catalogue {
		if slices.Contains(d.UsedBy, service) {
			out = append(out, d)
		}
	}
	return out
}
