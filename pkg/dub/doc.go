// Package dub reads and edits the lines of a finished dub: Segments lists a
// task's segments as people number them (from 1), and Redub changes the
// translation of one of them and starts a new output version that
// re-synthesizes that segment only and muxes again. dubctl and the console
// both call it; neither publishes anything itself beyond flushing the
// outbox rows Redub returns.
package dub
