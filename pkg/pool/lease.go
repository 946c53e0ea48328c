package pool

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// A replica serves most calls from its leases, without a round trip. A
// lease is what a replica holds of an engine in the shared schedule: the
// concurrency slots its calls took there (counted in the row's in_flight)
// and quota units taken ahead for calls to come (counted in the row's
// used); its row in engine_reservations (owner: the replica) stands for
// them and expires if the replica dies.
//
// An engine's lease lives for its term and its idle time: LeaseTerm and
// LeaseIdle, grown to leaseCallTerms times the engine's recent call time
// (a weighted mean of the replica's successful calls of it, from
// reservation to release) but no further than LeaseScaleMax, so that a
// lease outlives the gap between a consumer's calls of a slow engine
// (none grow for an engine with a rate limit).
//
// Every reservation the replica makes in a batch (batch.go) takes one slot
// and the call's units, and adds a few calls' worth of units to the lease,
// sized from the replica's rate: as many calls as it makes in
// leaseAheadTerms of the longest term of the call's candidates, at most
// leaseCalls and at most 1/leaseShare of what the engine has left after
// the call (in whole calls, so that the last calls of a quota are reserved
// one by one and the quota is spent exactly; none for an engine with a
// rate limit, whose calls all go through the database).
// A call that ends keeps its slot in the lease.
//
// For the engine's term after its last batch (the schedule's rows as it
// then read them: its view), a replica takes a call's slot and units from
// its lease when the lease has a free slot and the units, the engine has
// no rate limit (rpm: its slots are spaced in the shared row), no server
// errors in a row and no cool-down or open breaker in the view, and no
// engine the replica holds no slot of is better in the view (by fallback,
// then use for its weight: the database would choose that one). Otherwise
// the call goes to the replica's next batch, which renews the leases'
// expiry, counts the calls served from them and gives back their free
// slots before it reserves (the reservations take the slots they need
// again). A replica at work reads the rows again once its view is half a
// LeaseTerm old, in a batch of its own, so that its calls seldom find its
// view too old.
//
// What a lease holds unused goes back to the shared row: its free slots
// at the replica's first batch a term after the last give-back, and its
// units too if no call took any since; everything of an engine whose call
// failed, was rate limited or refused, at once (with the release that
// records it); everything of an engine the replica took nothing of (from
// its lease or in a batch) for its idle time (a batch of its own), and on
// Flush (a stopping worker).
//
// So an engine's in_flight counts the calls running on it plus the slots
// replicas keep between calls (for about a term while they are busy, the
// idle time once idle: at most LeaseScaleMax, or LeaseTerm and LeaseIdle
// if longer), and used counts the units spent plus those leased and not
// spent yet (Status.Leased: what the holders' leases kept at their last
// batches, at least what is still unspent). Neither limit is ever passed:
// a slot or unit is held in the shared row before any replica uses it. A
// cool-down, a breaker or a spent quota written by one replica stops the
// others' use of the engine at their next batch, at most a term after it
// was written: LeaseTerm for an engine whose calls take less than half of
// it, never more than LeaseScaleMax (or LeaseTerm if longer); the replica
// that saw it stops at once. A call that finds no quota in the rows while
// leases hold some waits rate_limit a LeaseTerm at a time (the holder
// spends them, or gives them back once it has not used them for a term),
// not no_quota. A replica that dies leaves its lease row to expire
// (Schedule.Lease): its slots are reaped then; its leased units are not
// refunded (they may have been spent) and come back with the next reset.

// DefaultLeaseTerm is how long a replica serves calls from its leases after
// its last batch.
const DefaultLeaseTerm = 100 * time.Millisecond

// DefaultLeaseIdle: a replica that took nothing from its lease of an
// engine this long gives back what it holds unused.
const DefaultLeaseIdle = 20 * time.Millisecond

// DefaultLeaseScaleMax bounds how far an engine's lease term and idle time
// grow with its call time (Schedule.LeaseScaleMax).
const DefaultLeaseScaleMax = 500 * time.Millisecond

// leaseCallTerms: an engine's lease term and idle time are at least this
// many of its recent call times (within LeaseScaleMax), so that a lease
// outlives the gaps between a consumer's calls of a slow engine.
const leaseCallTerms = 2

// callTimeWeight: each successful call moves an engine's recent call time
// (an exponentially weighted mean) by 1/callTimeWeight of the difference.
const callTimeWeight = 4

// leaseCalls and leaseShare bound the units a reservation leases ahead: at
// most leaseCalls calls' worth and 1/leaseShare of what the engine has
// left after the call.
const (
	leaseCalls = 256
	leaseShare = 8
	// leaseAheadTerms: a lease's units last this many LeaseTerms at the
	// replica's rate.
	leaseAheadTerms = 4
)

// lease is what the replica holds of one engine.
type lease struct {
	// gen changes when the lease is lost (its row reaped): the calls taken
	// before give nothing back to it.
	gen   int
	slots int   // held in the row's in_flight: busy and free
	busy  int   // of them, the calls running
	units int64 // held in the row's used, not spent yet
	calls int64 // served since the last batch, not yet in the row's calls
	used  int64 // calls taken since the last give-back
	// window is the quota window the units belong to.
	window time.Time
	// lastTake is when a call was last taken from the lease or reserved
	// for it in a batch, gaveBack when a batch last gave back its unused
	// slots and units (wall clock).
	lastTake, gaveBack time.Time
}

// rowView is an engine's row as the replica's last batch read it.
type rowView struct {
	fallback           bool
	weight, rpm, conc  int
	quota              int64
	used               int64 // less the replica's own leased units, plus what it spent since
	inFlight, failures int
	avail              time.Time // the latest of the rate's slot, the cool-down, the breaker
	window             time.Time
	// markedAt is when a call of the replica's cooled or failed the engine
	// (zero: never), marked* what it then marked.
	markedAt       time.Time
	markedAvail    time.Time
	markedFailures int
}

// leases is a replica's leases and view of the schedule.
type leases struct {
	mu    sync.Mutex
	owner string
	by    map[string]*lease
	view  map[string]*rowView
	// synced is when the rows in view were read (the schedule's clock).
	synced time.Time
	// taken counts the calls since rateAt (wall clock), rate those of the
	// LeaseTerm before.
	taken, rate int64
	rateAt      time.Time
	// callTime is each engine's recent call time: a weighted mean of its
	// successful calls' durations, from reservation to release.
	callTime map[string]time.Duration
	armed    bool
	// refreshing: a batch that reads the rows is on its way.
	refreshing bool
}

// ownerID names the replica in its lease rows.
func (s *Schedule) ownerID() string {
	l := &s.lease
	if l.owner == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		l.owner = hex.EncodeToString(b[:])
	}
	return l.owner
}

func (s *Schedule) leaseIdle() time.Duration {
	if s.LeaseIdle > 0 {
		return s.LeaseIdle
	}
	return DefaultLeaseIdle
}

func (s *Schedule) leaseTerm() time.Duration {
	if s.LeaseTerm > 0 {
		return s.LeaseTerm
	}
	return DefaultLeaseTerm
}

func (s *Schedule) leaseScaleMax() time.Duration {
	if s.LeaseScaleMax > 0 {
		return s.LeaseScaleMax
	}
	return DefaultLeaseScaleMax
}

// scaledLocked is base grown to leaseCallTerms of the engine's recent call
// time, within LeaseScaleMax (never below base; the caller holds l.mu).
// An engine with a rate limit keeps base: its calls all go through the
// database, a lease of it serves none.
func (s *Schedule) scaledLocked(name string, base time.Duration) time.Duration {
	if v := s.lease.view[name]; v != nil && v.rpm > 0 {
		return base
	}
	return max(base, min(leaseCallTerms*s.lease.callTime[name], s.leaseScaleMax()))
}

// termLocked is how long after its last batch the replica serves calls of
// the engine from its lease; idleLocked how long its lease of the engine
// may go unused before it is given back.
func (s *Schedule) termLocked(name string) time.Duration { return s.scaledLocked(name, s.leaseTerm()) }
func (s *Schedule) idleLocked(name string) time.Duration { return s.scaledLocked(name, s.leaseIdle()) }

// longestTermLocked is the longest term of cands.
func (s *Schedule) longestTermLocked(cands []string) time.Duration {
	longest := s.leaseTerm()
	for _, c := range cands {
		longest = max(longest, s.termLocked(c))
	}
	return longest
}

// less orders engines as the database does among those free now: the
// non-fallback first, then the least used for its weight.
func (v *rowView) less(o *rowView) bool {
	if v.fallback != o.fallback {
		return !v.fallback
	}
	return float64(v.used)/float64(max(v.weight, 1)) < float64(o.used)/float64(max(o.weight, 1))
}

// takeLocal takes a call of units on one of cands from the replica's
// leases; false: the call goes to the database.
func (s *Schedule) takeLocal(cands []string, units int64) (Reservation, bool) {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	wall := time.Now()
	if wall.Sub(l.rateAt) >= s.leaseTerm() {
		l.rate, l.taken, l.rateAt = l.taken, 0, wall
	}
	l.taken++
	now := s.now()
	age := now.Sub(l.synced)
	if l.view == nil || age < 0 || age >= s.longestTermLocked(cands) {
		return Reservation{}, false
	}
	if age >= s.leaseTerm()/2 && !l.refreshing {
		// A replica at work reads the rows again before its view is too old
		// to serve from, in a batch nobody waits for.
		l.refreshing = true
		defer func() { s.submit(&op{refresh: true}, false); go s.send(true) }()
	}
	best := s.bestLocked(cands, units, now, age)
	if best == "" {
		return Reservation{}, false
	}
	ls, v := l.by[best], l.view[best]
	ls.busy++
	ls.units -= units
	ls.calls++
	ls.used++
	ls.lastTake = wall
	v.used += units
	s.armIdleLocked()
	return Reservation{Engine: best, Units: units, At: now, gen: ls.gen, start: wall}, true
}

// bestLocked is the engine of cands a call of units is served from in the
// replica's leases ("" none), its view of the rows age old: one whose
// lease has a free slot and the units, with no rate limit (rpm: its slots
// are spaced in the shared row), no server errors in a row, no cool-down or
// open breaker in the view, and a view younger than the engine's term;
// none when an engine the replica holds no slot of is better in the view
// (the database would choose that one).
func (s *Schedule) bestLocked(cands []string, units int64, now time.Time, age time.Duration) string {
	l := &s.lease
	window := s.Cfg.WindowStart(now)
	var best string
	for _, c := range cands {
		v, ls := l.view[c], l.by[c]
		if v == nil {
			return ""
		}
		if v.avail.After(now) || v.window.After(window) || age >= s.termLocked(c) {
			continue
		}
		if ls != nil && ls.slots > ls.busy && ls.units >= units && ls.window.Equal(window) && v.rpm == 0 && v.failures == 0 {
			if best == "" || v.less(l.view[best]) {
				best = c
			}
		}
	}
	if best == "" {
		return ""
	}
	for _, c := range cands {
		v, ls := l.view[c], l.by[c]
		held := ls != nil && ls.slots > 0
		free := (v.quota == 0 || v.used+units <= v.quota) && (v.conc == 0 || v.inFlight < v.conc)
		if !held && free && !v.avail.After(now) && v.less(l.view[best]) {
			return "" // the database would choose c
		}
	}
	return best
}

// releaseLocal frees res's slot in its lease (its units too when refunded),
// counts a successful call's time in the engine's recent call time, and
// marks in the replica's view what r says of the engine, so that the
// replica's next calls leave a cooled or failing engine to the database.
func (s *Schedule) releaseLocal(res Reservation, r result) {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.ok && !res.start.IsZero() {
		d := time.Since(res.start)
		if old, ok := l.callTime[res.Engine]; ok {
			d = old + (d-old)/callTimeWeight
		}
		if l.callTime == nil {
			l.callTime = map[string]time.Duration{}
		}
		l.callTime[res.Engine] = d
	}
	if ls := l.by[res.Engine]; ls != nil && ls.gen == res.gen && ls.busy > 0 {
		ls.busy--
		if r.refund {
			ls.units += res.Units
			if v := l.view[res.Engine]; v != nil {
				v.used -= res.Units
			}
		}
	}
	if v := l.view[res.Engine]; v != nil && (r.failure || !r.coolUntil.IsZero()) {
		v.markedAt = s.now()
		if r.coolUntil.After(v.avail) {
			v.avail = r.coolUntil
		}
		if r.failure {
			v.failures++
		}
		v.markedAvail, v.markedFailures = v.avail, v.failures
	}
	s.armIdleLocked()
}

// armIdleLocked has a timer give back what a lease holds unused once the
// replica took nothing from it for its idle time (the caller holds l.mu).
func (s *Schedule) armIdleLocked() {
	l := &s.lease
	if l.armed {
		return
	}
	l.armed = true
	time.AfterFunc(s.leaseIdle(), s.idle)
}

// idle gives back what the leases the replica took nothing from for their
// idle time hold unused, and waits for the others.
func (s *Schedule) idle() {
	l := &s.lease
	l.mu.Lock()
	l.armed = false
	var idle []string
	var next time.Duration
	for name, ls := range l.by {
		if ls.slots == ls.busy && ls.units == 0 && ls.calls == 0 {
			continue
		}
		left := s.idleLocked(name) - time.Since(ls.lastTake)
		switch {
		case left <= 0:
			idle = append(idle, name)
		case next == 0 || left < next:
			next = left
		}
	}
	if next > 0 {
		l.armed = true
		time.AfterFunc(next, s.idle)
	}
	l.mu.Unlock()
	if len(idle) > 0 {
		s.submit(&op{flush: true, engines: idle}, false)
	}
}

// settlement is what a batch gives back of the replica's leases.
type settlement struct {
	names []string
	gens  []int
	slots []int32
	units []int64
	calls []int64
	wins  []time.Time
	// left are the units the leases keep.
	left []int64
}

// settle takes out of the leases what the next batch gives back: the calls
// served; the free slots when the batch reserves (its reservations take
// the slots they need again); at the first batch a term (the engine's)
// after the last give-back, the free slots and the units of the leases not
// used since; when all, and of the engines in drop (whose calls failed or
// were refused, or idle leases), everything unused. Every lease holding
// something is in it (its expiry renewed).
func (s *Schedule) settle(all, reserving bool, drop map[string]bool) *settlement {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	st := &settlement{}
	for name, ls := range l.by {
		if ls.slots == 0 && ls.units == 0 && ls.calls == 0 {
			continue
		}
		term := time.Since(ls.gaveBack) >= s.termLocked(name)
		if all || term {
			ls.gaveBack = time.Now()
		}
		free, units := ls.slots-ls.busy, ls.units
		switch {
		case all || drop[name]:
		case term && ls.used == 0:
		case term || reserving: // the reservations take the slots they need again
			units = 0
		default:
			free, units = 0, 0
		}
		if all || term || drop[name] {
			ls.used = 0
		}
		st.names = append(st.names, name)
		st.gens = append(st.gens, ls.gen)
		st.slots = append(st.slots, int32(free))
		st.units = append(st.units, units)
		st.calls = append(st.calls, ls.calls)
		st.wins = append(st.wins, ls.window)
		ls.slots -= free
		ls.units -= units
		ls.calls = 0
		st.left = append(st.left, ls.units)
	}
	return st
}

// restore puts back what a batch that failed was to give back (and lets
// the next refresh go).
func (s *Schedule) restore(st *settlement) {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refreshing = false
	for i, name := range st.names {
		if ls := l.by[name]; ls != nil && ls.gen == st.gens[i] {
			ls.slots += int(st.slots[i])
			ls.units += st.units[i]
			ls.calls += st.calls[i]
		}
	}
}

// viewRow is an engine's row as a batch reads it last.
type viewRow struct {
	name string
	v    rowView
}

// apply records a batch that committed: the leases whose rows were reaped
// (not among kept) are lost, the reservations' slots and units join the
// leases, and the rows read are the replica's view as of now.
func (s *Schedule) apply(st *settlement, kept map[string]bool, ops []*op, rows []viewRow, now, window time.Time) {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	wall := time.Now()
	if l.by == nil {
		l.by = map[string]*lease{}
	}
	for i, name := range st.names {
		if ls := l.by[name]; ls != nil && ls.gen == st.gens[i] && !kept[name] {
			*ls = lease{gen: ls.gen + 1}
		}
	}
	for _, o := range ops {
		if !o.reserves() || !o.ok {
			continue
		}
		ls := l.by[o.res.Engine]
		if ls == nil {
			ls = &lease{}
			l.by[o.res.Engine] = ls
		}
		if !ls.window.Equal(window) {
			ls.units, ls.window = 0, window // units of another window are not spent in this one
		}
		ls.slots++
		ls.busy++
		ls.used++
		ls.units += o.extra
		ls.lastTake = wall
		o.res.gen, o.res.start = ls.gen, wall
	}
	old := l.view
	l.view = make(map[string]*rowView, len(rows))
	for _, r := range rows {
		v := r.v
		if ls := l.by[r.name]; ls != nil {
			v.used -= ls.units
		}
		if o := old[r.name]; o != nil && !o.markedAt.IsZero() && !o.markedAt.Before(now) {
			// A call of the replica cooled or failed it while the batch was on its way.
			v.avail, v.failures = latest(v.avail, o.markedAvail), max(v.failures, o.markedFailures)
			v.markedAt, v.markedAvail, v.markedFailures = o.markedAt, o.markedAvail, o.markedFailures
		}
		l.view[r.name] = &v
	}
	l.synced = now
	l.refreshing = false
	if len(l.by) > 0 {
		s.armIdleLocked()
	}
}

// leaseAhead is how many calls' worth of units a reservation on one of
// cands leases ahead: as many as the replica took in leaseAheadTerms of
// the longest of their terms of late, within leaseCalls.
func (s *Schedule) leaseAhead(cands []string) int64 {
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	scale := float64(s.longestTermLocked(cands)) / float64(s.leaseTerm())
	return min(int64(float64(max(l.taken, l.rate, 1)*leaseAheadTerms)*scale), leaseCalls)
}
