// Package dub edits the lines of a dub. Before the voice is made, a task
// waiting in review (pkg/task's Review) takes a person's edits — EditLine,
// SplitLine, MergeLines, DeleteLine — each recorded in review_edits, and
// Approve lets it go on (review.go). After it, Redub changes the
// translation of one segment (numbered from 1, as view.Segments numbers
// them) and starts a new output version that re-synthesizes that segment
// only and muxes again; a parent task is refused with the names of its
// children. dubctl and the console both call it; neither publishes anything
// itself beyond flushing the outbox rows Redub returns. ReadSegments is the
// workers' one way to read segment rows.
package dub
