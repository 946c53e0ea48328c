// Package events is the console's live events: a hub that watches
// Postgres for task and step changes and fans them out to its
// subscribers, and the Server-Sent Events stream that sends them to a
// client, resuming after Last-Event-ID.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dubflow/dubflow/pkg/task"
	"github.com/dubflow/dubflow/pkg/view"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// Live events. Each replica watches Postgres on its own — one pair of
// indexed queries a poll, whatever the number of clients — and fans the
// changes out to its clients: any replica serves any client, and nothing
// is lost or duplicated by the number of replicas, as it would be with a
// shared broker queue.
const (
	// pollInterval is how often the hub reads what changed; a change of a
	// task's status (task.StatusChannel) makes it read at once, but no
	// sooner than minPollSpacing after the last read.
	pollInterval   = time.Second
	minPollSpacing = 200 * time.Millisecond
	// watchedTasks bounds the unfinished tasks watched (the most recently
	// updated first).
	watchedTasks = 500
	// subscriberBuffer is how many events a slow client may lag behind
	// before it is disconnected (it reconnects and reloads).
	subscriberBuffer = 256
	// pingInterval keeps idle streams open through proxies.
	pingInterval = 15 * time.Second
	// recentWindow is how long a finished task or attempt stays watched.
	recentWindow = 30 * time.Second
	// replaySlack is how far before Last-Event-ID a resumed stream starts
	// again: a change committed a little after an event with a later time
	// is replayed, not lost. Events are states, so a repeat is harmless.
	replaySlack = 5 * time.Second
	// maxReplayAge and maxReplayEvents bound a resume; past them the
	// stream sends a reset event and the client reloads what it shows.
	maxReplayAge    = 10 * time.Minute
	maxReplayEvents = 5000
)

// Event is one SSE event: task or step, with its JSON data and the time of
// the change it reports (microseconds since the epoch; its SSE id).
type Event struct {
	kind   string
	taskID uuid.UUID
	data   []byte
	at     int64
	// project is the task's: a project's subscriber gets its own only.
	project string
}

// taskEvent is the data of a task event (the read model's TaskChange).
type taskEvent = view.TaskChange

// stepEvent is the data of a step event: one attempt of one part (the read
// model's StepAttempt).
type stepEvent = view.StepAttempt

// Subscriber receives the events of one task, or of all (uuid.Nil); of
// one project's tasks only when project is not "" (a project's token).
type Subscriber struct {
	task    uuid.UUID
	project string
	ch      chan Event
}

// wants reports whether ev is for s. A subscriber of one task gets its
// events whatever they say of the project: the guard let only the task's
// own project subscribe to it.
func (s *Subscriber) wants(ev Event) bool {
	if s.task != uuid.Nil {
		return s.task == ev.taskID
	}
	return s.project == "" || s.project == ev.project
}

// Hub polls Postgres for task and step changes and fans them out.
type Hub struct {
	pool *pgxpool.Pool
	log  zerolog.Logger

	mu   sync.Mutex
	subs map[*Subscriber]struct{}
	// stopped is closed when run returns: streams end so that a shutdown
	// does not wait for them.
	stopped chan struct{}

	// polledAt is the database time at the start of the last poll whose
	// events are all published (microseconds).
	polledAt atomic.Int64

	// Owned by the poll loop.
	tasks map[uuid.UUID]taskEvent
	steps map[int64]string
}

// New returns a hub reading pool; it publishes once Run runs.
func New(pool *pgxpool.Pool, log zerolog.Logger) *Hub {
	return &Hub{pool: pool, log: log, subs: map[*Subscriber]struct{}{}, stopped: make(chan struct{}),
		tasks: map[uuid.UUID]taskEvent{}, steps: map[int64]string{}}
}

// Subscribe starts handing the events of task (of every task for
// uuid.Nil) to a subscriber; of project's tasks only unless project is "".
// Unsubscribe ends it.
func (h *Hub) Subscribe(task uuid.UUID, project string) *Subscriber {
	s := &Subscriber{task: task, project: project, ch: make(chan Event, subscriberBuffer)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Unsubscribe ends s's subscription.
func (h *Hub) Unsubscribe(s *Subscriber) {
	h.mu.Lock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.ch)
	}
	h.mu.Unlock()
}

// publish hands ev to its subscribers; one too far behind is dropped.
func (h *Hub) publish(ev Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if !s.wants(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			delete(h.subs, s)
			close(s.ch)
		}
	}
}

// Run polls every pollInterval, and at once (but no sooner than
// minPollSpacing after the last poll) when a task's status changes, until
// ctx is cancelled; a failed poll is logged and retried.
func (h *Hub) Run(ctx context.Context) error {
	defer close(h.stopped)
	changes := task.Listen(ctx, h.pool)
	defer changes.Close()
	for {
		last := time.Now()
		if err := h.poll(ctx); err != nil && ctx.Err() == nil {
			h.log.Warn().Err(err).Msg("events poll")
		}
		if changes.Wait(ctx, pollInterval-time.Since(last), nil) != nil {
			return nil
		}
		// A burst of changes (many tasks ending together) is read in one
		// poll rather than one each.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(minPollSpacing - time.Since(last)):
		}
	}
}

// poll reads the watched tasks and their attempts and publishes what
// changed since the last poll in the order of the changes (at start, when
// nobody listens yet, it only learns the state).
func (h *Hub) poll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now, err := view.Now(ctx, h.pool)
	if err != nil {
		return err
	}
	tasks, err := readTasks(ctx, h.pool, uuid.Nil, now.Add(-recentWindow))
	if err != nil {
		return err
	}
	ids := make([]uuid.UUID, 0, len(tasks))
	seen := make(map[uuid.UUID]taskEvent, len(tasks))
	for _, t := range tasks {
		ids = append(ids, t.TaskID)
		seen[t.TaskID] = t
	}
	steps, err := readSteps(ctx, h.pool, ids, now.Add(-recentWindow), true)
	if err != nil {
		return err
	}
	var out []Event
	next := make(map[int64]string, len(steps))
	for id, st := range steps {
		next[id] = stepKey(st)
		if old, ok := h.steps[id]; !ok || old != next[id] {
			out = append(out, stepEventOf(st, seen[st.TaskID].Project))
		}
	}
	for _, t := range tasks {
		if old, ok := h.tasks[t.TaskID]; !ok || old.Status != t.Status || !old.UpdatedAt.Equal(t.UpdatedAt) {
			out = append(out, TaskEvent(t))
		}
	}
	sortEvents(out)
	for _, ev := range out {
		h.publish(ev)
	}
	h.tasks, h.steps = seen, next
	h.polledAt.Store(now.UnixMicro())
	return nil
}

// stepKey is what identifies a state of an attempt.
func stepKey(st stepEvent) string {
	if st.FinishedAt != nil {
		return st.Status + st.FinishedAt.String()
	}
	return st.Status
}

// TaskEvent is the event of t's state.
func TaskEvent(t view.TaskChange) Event {
	b, _ := json.Marshal(t)
	return Event{kind: "task", taskID: t.TaskID, data: b, at: t.UpdatedAt.UnixMicro(), project: t.Project}
}

// stepEventOf dates an attempt's event by its latest change (start or
// end); project is its task's.
func stepEventOf(st stepEvent, project string) Event {
	b, _ := json.Marshal(st)
	at := st.StartedAt
	if st.FinishedAt != nil && st.FinishedAt.After(at) {
		at = *st.FinishedAt
	}
	return Event{kind: "step", taskID: st.TaskID, data: b, at: at.UnixMicro(), project: project}
}

// sortEvents orders events by the time of their change, tasks after the
// steps of the same moment.
func sortEvents(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].at != evs[j].at {
			return evs[i].at < evs[j].at
		}
		return evs[i].kind == "step" && evs[j].kind == "task"
	})
}

// querier reads rows (the pool, or a transaction).
type querier = view.Querier

// readTasks reads the unfinished tasks (watchedTasks of them) and those
// finished after since; only task one unless it is uuid.Nil.
func readTasks(ctx context.Context, db querier, one uuid.UUID, since time.Time) ([]taskEvent, error) {
	return view.TaskChanges(ctx, db, one, since, watchedTasks)
}

// readSteps reads the attempts of the tasks ids that started or finished
// after since, and with running those running now.
func readSteps(ctx context.Context, db querier, ids []uuid.UUID, since time.Time, running bool) (map[int64]stepEvent, error) {
	return view.StepAttempts(ctx, db, ids, since, running)
}

// replay reads the changes after since (of task one, or of every task for
// uuid.Nil) as events in the order of the changes; ok is false when there
// are more than maxReplayEvents.
func replay(ctx context.Context, db querier, one uuid.UUID, since time.Time) ([]Event, bool, error) {
	tasks, err := readTasks(ctx, db, one, since)
	if err != nil {
		return nil, false, err
	}
	var out []Event
	ids := make([]uuid.UUID, 0, len(tasks)+1)
	projects := make(map[uuid.UUID]string, len(tasks))
	for _, t := range tasks {
		projects[t.TaskID] = t.Project
		ids = append(ids, t.TaskID)
		if t.UpdatedAt.After(since) {
			out = append(out, TaskEvent(t))
		}
	}
	if one != uuid.Nil && len(ids) == 0 {
		ids = append(ids, one) // finished before since: its late attempts still count
	}
	steps, err := readSteps(ctx, db, ids, since, false)
	if err != nil {
		return nil, false, err
	}
	for _, st := range steps {
		out = append(out, stepEventOf(st, projects[st.TaskID]))
	}
	sortEvents(out)
	return out, len(out) <= maxReplayEvents, nil
}

// resumption is where a stream starts: the events to send first and the
// stream's first id.
type resumption struct {
	events []Event
	reset  string // why the client must reload, when it must
	id     int64
}

// resume reads what a client that saw the event lastID missed; without
// lastID, nothing but the current time as the stream's id.
func (h *Hub) resume(ctx context.Context, one uuid.UUID, lastID string) (resumption, error) {
	now, err := view.Now(ctx, h.pool)
	if err != nil {
		return resumption{}, err
	}
	res := resumption{id: now.UnixMicro()}
	if lastID == "" {
		return res, nil
	}
	micros, err := strconv.ParseInt(lastID, 10, 64)
	last := time.UnixMicro(micros)
	switch {
	case err != nil:
		res.reset = "Last-Event-ID " + strconv.Quote(lastID) + " is not an id of this stream"
		return res, nil
	case now.Sub(last) > maxReplayAge:
		res.reset = fmt.Sprintf("Last-Event-ID is older than %s", maxReplayAge)
		return res, nil
	}
	evs, ok, err := replay(ctx, h.pool, one, last.Add(-replaySlack))
	if err != nil {
		return res, err
	}
	if !ok {
		res.reset = fmt.Sprintf("more than %d changes since Last-Event-ID", maxReplayEvents)
		return res, nil
	}
	res.events, res.id = evs, max(res.id, micros)
	return res, nil
}

// Stream writes sub's events as Server-Sent Events until the client
// leaves or falls too far behind, or the hub stops; one is the task sub
// follows (uuid.Nil for all) and first, when not nil, the event to start
// with when the client resumes nothing. It returns an error, having
// written nothing, only when the start cannot be read. Each event's id is the time of the latest change
// the stream has sent (microseconds, never decreasing); a client that
// reconnects with it in Last-Event-ID gets the changes it missed (with
// some repeated), or a reset event when too much was missed.
func (h *Hub) Stream(w http.ResponseWriter, r *http.Request, sub *Subscriber, one uuid.UUID, first *Event) error {
	res, err := h.resume(r.Context(), one, r.Header.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	hwm := res.id
	send := func(ev Event) {
		hwm = max(hwm, ev.at)
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", hwm, ev.kind, ev.data)
	}
	switch {
	case res.reset != "":
		b, _ := json.Marshal(map[string]string{"reason": res.reset})
		fmt.Fprintf(w, "id: %d\nevent: reset\ndata: %s\n\n", hwm, b)
	case len(res.events) > 0:
		for _, ev := range res.events {
			if sub.wants(ev) {
				send(ev)
			}
		}
	case first != nil:
		send(*first)
	default:
		fmt.Fprintf(w, "id: %d\n\n", hwm) // sets the id without an event
	}
	_ = rc.Flush()
	ping := time.NewTicker(pingInterval)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-h.stopped:
			return nil
		case <-ping.C:
			// Every change before the last poll has been handed over; move
			// the id up to it unless events still wait to be written.
			if len(sub.ch) == 0 && h.polledAt.Load() > hwm {
				hwm = h.polledAt.Load()
				fmt.Fprintf(w, "id: %d\n\n", hwm)
			}
			fmt.Fprint(w, ": ping\n\n")
		case ev, ok := <-sub.ch:
			if !ok {
				return nil
			}
			send(ev)
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

// PolledAt is the database time, in microseconds since the epoch, at the
// start of the last poll whose events are all published.
func (h *Hub) PolledAt() int64 { return h.polledAt.Load() }
