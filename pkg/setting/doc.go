// Package setting is dubflow's run-time settings: seed 003's system_config,
// the values operators tune while the services run (batch sizes,
// concurrency, retry delays, the reservation timeout, the stuck-task
// threshold, the metric retention, the bound on engine waits).
//
// The Catalogue names every setting: its key (the seed's where one
// applies), category, description, type, bounds, the environment variable
// that gives its first value, and the services that use it. Each service
// seeds the settings it uses on its first start (Seed: the variable's
// value, else the default); from then on the table holds the value, and
// the variable only gives the first one (a start whose variable differs
// logs a warning). Set changes a value after Check, which refuses what the
// type or bounds do not allow; the database refuses it too, with the same
// words (system_config_problem, a trigger). The console's PUT
// /api/config/{key} and dubctl config set are its doors.
//
// A running service holds a Watch: the values read at start, read again on
// each change announced on Channel (LISTEN/NOTIFY) and every Poll as a
// fallback, so that a change takes effect within seconds without a
// restart; services read the value in force where they use it.
package setting
