// Package observe reads what the chaos run judges: the integrator's view
// of the events (Observer, a queue bound to event.#), the tasks, their
// attempts and outputs in the database and the object store (Collect), and
// the services' metrics summed across restarts (MetricSum).
package observe
