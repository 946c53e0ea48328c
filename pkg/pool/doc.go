// Package pool runs a step's remote engines as a pool (issue 30): several
// engines (keys, providers, the embedded engine as a fallback), each with a
// weight, a rate (requests per minute), a bound on concurrent calls and a
// daily quota in the step's unit (asr: audio seconds; translate and tts:
// characters) that resets at a configured hour.
//
// Every replica of every worker shares one schedule in Postgres
// (engine_schedule, one row per engine; engine_reservations, each
// replica's lease of an engine, which expires when its worker dies). A
// call reserves an engine in its replica's next batch (one transaction for
// all the replica's calls that want one at that moment): the engine with
// quota left and the earliest availability, the least used for its weight
// first. The replica keeps the call's slot and a few calls' worth of quota
// in its lease of the engine and serves its next calls from it without a
// round trip for a short term (lease.go), giving back what it does not
// use. A 429
// cools the engine down for its Retry-After and the call moves to the next
// engine; server errors and timeouts count towards a circuit breaker. When
// no engine can serve, the call returns fault.Wait with the reason
// (no_quota, rate_limit, no_engine) and the time it can go on: the step
// runtime records the attempt as waiting and re-offers the step then,
// without spending its retry budget.
package pool
