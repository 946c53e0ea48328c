// Package review holds the shapes of a task's lines under review and of
// the edits people make to them: what the writer of those edits (pkg/dub)
// and the read model (pkg/view) share, in a leaf of its own so that
// neither stands on the other.
package review

import "time"

// Line is one line under review.
type Line struct {
	// N numbers the line from 1 in timeline order: the number the edits
	// take (as dubctl segments numbers them).
	N       int `json:"n"`
	StartMS int `json:"startMs"`
	EndMS   int `json:"endMs"`
	// Speaker is who says the line ("" when not known yet: the voices are
	// told apart when the speech is made).
	Speaker string `json:"speaker"`
	// Source is what is said; Text its translation, null while there is
	// none (it is made on approval).
	Source string  `json:"source"`
	Text   *string `json:"text"`
}

// Edit is one change a person made to a task's lines in review, or
// an approval: who, when, which line, and the lines it touched before and
// after (an import: every line; an approval: none).
type Edit struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Stage  string    `json:"stage"`
	// Line is the line edited, split, merged with the next or deleted,
	// numbered as the lines read before the edit (null for an import or
	// an approval).
	Line   *int   `json:"line"`
	Before []Line `json:"before"`
	After  []Line `json:"after"`
}
