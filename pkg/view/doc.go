// Package view is dubflow's one read model: what the console's API answers
// and what dubctl prints, in both of dubctl's modes. A task's summary and
// detail (steps with their parts and attempts, segment counts, languages:
// a parent's targets and children, a child's parent), its segments, its
// output versions, its dead letters and the list of tasks are loaded here
// from Postgres, into one set of structs with one JSON casing (the API's
// camelCase). The console encodes them; dubctl with a database loads them
// through this package and dubctl without one decodes the console's JSON
// into the same structs, so both print the same facts.
package view
