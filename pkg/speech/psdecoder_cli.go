//go:build !(cgo && pocketsphinx_lib)

package speech

import (
	"errors"
	"io"
)

// residentLoaded reports whether this build decodes in process: built
// without cgo or without the tag pocketsphinx_lib (libpocketsphinx-dev),
// the recogniser runs pocketsphinx_continuous for every file.
const residentLoaded = false

type psDecoder struct{}

var errNotLoaded = errors.New("pocketsphinx: built without libpocketsphinx (tag pocketsphinx_lib)")

func newPSDecoder([]string) (*psDecoder, error) { return nil, errNotLoaded }
func (*psDecoder) decode(io.Reader, []float64, func(int)) (string, error) {
	return "", errNotLoaded
}
func (*psDecoder) free() {}
