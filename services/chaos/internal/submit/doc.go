// Package submit makes the chaos run's videos — short clips of the real
// speech in $DUBFLOW_FIXTURES — and submits them with bin/dubctl
// (Submitter), a failed submission retried.
package submit
