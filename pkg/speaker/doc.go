// Package speaker tells the speakers of a recording apart, offline: it
// measures each speech segment's voice (median pitch by autocorrelation and
// the RMS frequency of the spectrum), clusters the segments into speakers,
// and gives each speaker a synthesis voice of a matching register (a low
// voice gets a low voice).
package speaker
