//go:build cgo && pocketsphinx_lib

package speech

/*
#cgo pkg-config: pocketsphinx sphinxbase
#include <stdlib.h>
#include <string.h>
#include <pocketsphinx.h>
#include <sphinxbase/err.h>
#include <sphinxbase/feat.h>
#include <sphinxbase/cmn.h>

// psd is one loaded decoder and the cepstral-mean state it started with,
// restored before every stream so that each file is decoded as by a
// fresh pocketsphinx_continuous.
typedef struct {
	ps_decoder_t *ps;
	cmd_ln_t *config;
	int32 frate;
	int32 veclen;
	mfcc_t *mean0, *sum0;
	int32 nframe0;
} psd;

// psd_quiet turns sphinxbase's logging off for the whole process: no
// callback (err_msg returns before it formats a message) and no log file.
// Called once, under libMu, before the first decoder is loaded; nothing
// sets either again (psCheckArgs refuses -logfn), so the messages every
// decode logs only read them.
static void psd_quiet(void) {
	err_set_callback(NULL, NULL);
	err_set_logfp(NULL);
}

static psd *psd_new(int argc, char **argv) {
	cmd_ln_t *config = cmd_ln_parse_r(NULL, ps_args(), argc, argv, TRUE);
	if (config == NULL) return NULL;
	ps_default_search_args(config);
	ps_decoder_t *ps = ps_init(config);
	if (ps == NULL) { cmd_ln_free_r(config); return NULL; }
	psd *d = calloc(1, sizeof(psd));
	d->ps = ps;
	d->config = config;
	d->frate = cmd_ln_int32_r(config, "-frate");
	cmn_t *cmn = ps_get_feat(ps)->cmn_struct;
	if (cmn != NULL) {
		d->veclen = cmn->veclen;
		d->mean0 = malloc(sizeof(mfcc_t) * cmn->veclen);
		d->sum0 = malloc(sizeof(mfcc_t) * cmn->veclen);
		memcpy(d->mean0, cmn->cmn_mean, sizeof(mfcc_t) * cmn->veclen);
		memcpy(d->sum0, cmn->sum, sizeof(mfcc_t) * cmn->veclen);
		d->nframe0 = cmn->nframe;
	}
	return d;
}

// psd_start_stream resets what a decoder carries from one file to the
// next: the sample and frame counters, the noise estimate and the
// cepstral mean.
static void psd_start_stream(psd *d) {
	ps_start_stream(d->ps);
	cmn_t *cmn = ps_get_feat(d->ps)->cmn_struct;
	if (cmn != NULL && d->mean0 != NULL) {
		memcpy(cmn->cmn_mean, d->mean0, sizeof(mfcc_t) * d->veclen);
		memcpy(cmn->sum, d->sum0, sizeof(mfcc_t) * d->veclen);
		cmn->nframe = d->nframe0;
	}
}

// psd_start_stream_mean starts a stream as psd_start_stream does, the
// cepstral mean then set to mean as cmn_live_set does (the mean of a
// window's worth of frames).
static void psd_start_stream_mean(psd *d, const double *mean) {
	psd_start_stream(d);
	cmn_t *cmn = ps_get_feat(d->ps)->cmn_struct;
	if (cmn == NULL || d->mean0 == NULL) return;
	for (int i = 0; i < d->veclen; i++) {
		cmn->cmn_mean[i] = FLOAT2MFCC(mean[i]);
		cmn->sum[i] = FLOAT2MFCC(mean[i]) * d->nframe0;
	}
	cmn->nframe = d->nframe0;
}

static double psd_conf(psd *d, ps_seg_t *s) {
	int32 pprob = ps_seg_prob(s, NULL, NULL, NULL);
	return (float)logmath_exp(ps_get_logmath(d->ps), pprob);
}

static void psd_free(psd *d) {
	ps_free(d->ps);
	cmd_ln_free_r(d->config);
	free(d->mean0);
	free(d->sum0);
	free(d);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"unsafe"
)

// residentLoaded reports whether this build decodes in process.
const residentLoaded = true

// libMu serializes the calls into pocketsphinx and sphinxbase that read or
// write their process-wide state: loading a decoder (psd_new) and freeing
// one (psd_free). Debian's 0.8+5prealpha keeps, in its sources and its
// binaries alike:
//
//   - sphinxbase err.c: the log FILE, whether logging is off, the log
//     callback and the debug level. ps_init sets the debug level from
//     -debug and, given -logfn, opens a log file, makes it the process's
//     and fcloses the one before (err_set_logfile) while other threads may
//     be printing to it. Two decoders loaded at once with -logfn (as the
//     resident tests were) can fclose one FILE twice or print to a freed
//     one; glibc then waits for ever on the freed FILE's lock, holding its
//     list of open files, which every fopen and fclose of the process then
//     waits for: the hang of issue 47, two goroutines in psd_new and every
//     thread on a futex.
//   - sphinxbase dtoa.c: the free lists of big integers and the cached
//     powers of five of sb_strtod (atof_c), built without their lock: every
//     float flag cmd_ln_parse_r reads (the beams' 1e-48 and the like), the
//     model's feat.params and -cmninit go through them. Two loads at once
//     can share one big integer and read a wrong beam.
//   - sphinxbase fe_warp_*.c: the frequency warp's parameters, set with
//     strtok (its position is libc's, shared) whenever a front end is made;
//     and genrand.c's random generator, seeded by fe_init and drawn from by
//     every frame of a decoder made with -dither.
//
// Freeing takes libMu as well: ps_free tears down the same modules, the
// library promises nothing about threads, and the idle sweeper's free may
// otherwise run beside a file's load; it costs milliseconds against a
// load's 0.3 CPU-s. Loads wait for each other (a pool of three loads its
// third decoder after the two others), decodes never wait for libMu: a
// decode (ps_start_stream to ps_end_utt, ps_get_hyp, ps_seg_*) touches
// none of the above once logging is off before the first decoder
// (psd_quiet; its messages then only read the callback) and the flags that
// would set it again are refused (psCheckArgs).
var libMu sync.Mutex

// quiet turns the library's logging off once, before the first decoder.
var quiet sync.Once

// psDecoder is a pocketsphinx decoder loaded in this process. It is not
// safe for concurrent use.
type psDecoder struct {
	d   *C.psd
	buf []int16
	out strings.Builder
}

// newPSDecoder loads a decoder with the command-line arguments args (the
// flags pocketsphinx_continuous takes, without -infile, -time, -logfn).
func newPSDecoder(args []string) (*psDecoder, error) {
	if err := psCheckArgs(args); err != nil {
		return nil, err
	}
	argv := make([]*C.char, len(args))
	for i, a := range args {
		argv[i] = C.CString(a)
		defer C.free(unsafe.Pointer(argv[i]))
	}
	var p **C.char
	if len(argv) > 0 {
		cargv := (**C.char)(C.malloc(C.size_t(len(argv)) * C.size_t(unsafe.Sizeof(p))))
		defer C.free(unsafe.Pointer(cargv))
		copy(unsafe.Slice(cargv, len(argv)), argv)
		p = cargv
	}
	libMu.Lock()
	quiet.Do(func() { C.psd_quiet() })
	d := C.psd_new(C.int(len(args)), p)
	libMu.Unlock()
	if d == nil {
		return nil, fmt.Errorf("pocketsphinx: load decoder with %q failed", strings.Join(args, " "))
	}
	return &psDecoder{d: d, buf: make([]int16, 2048)}, nil
}

// decode decodes the 16-bit samples r holds as one stream, as
// pocketsphinx_continuous -time yes does (2048 samples at a time,
// an utterance ended wherever the voice activity detector leaves
// speech), and returns what that command prints. It calls progress with
// the samples the decoder took whenever it took some, and with 0 when it
// ended an utterance.
func (p *psDecoder) decode(r io.Reader, cmnMean []float64, progress func(samples int)) (string, error) {
	if len(cmnMean) == int(p.d.veclen) && p.d.veclen > 0 {
		C.psd_start_stream_mean(p.d, (*C.double)(unsafe.Pointer(&cmnMean[0])))
	} else {
		C.psd_start_stream(p.d)
	}
	ps := p.d.ps
	p.out.Reset()
	if C.ps_start_utt(ps) < 0 {
		return "", errors.New("pocketsphinx: start utterance failed")
	}
	bytes := unsafe.Slice((*byte)(unsafe.Pointer(&p.buf[0])), 2*len(p.buf))
	started := false
	for {
		n, err := io.ReadFull(r, bytes)
		if k := n / 2; k > 0 {
			C.ps_process_raw(ps, (*C.int16)(unsafe.Pointer(&p.buf[0])), C.size_t(k), 0, 0)
			progress(k)
			inSpeech := C.ps_get_in_speech(ps) != 0
			if inSpeech && !started {
				started = true
			}
			if !inSpeech && started {
				C.ps_end_utt(ps)
				p.printUtterance()
				C.ps_start_utt(ps)
				progress(0)
				started = false
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			C.ps_end_utt(ps)
			return "", fmt.Errorf("pocketsphinx: read: %w", err)
		}
	}
	C.ps_end_utt(ps)
	if started {
		p.printUtterance()
	}
	return p.out.String(), nil
}

// free releases the decoder's model; it must not be used again.
func (p *psDecoder) free() {
	libMu.Lock()
	C.psd_free(p.d)
	libMu.Unlock()
	p.d = nil
}

// printUtterance writes the ended utterance's hypothesis and word times
// the way pocketsphinx_continuous prints them.
func (p *psDecoder) printUtterance() {
	ps := p.d.ps
	if hyp := C.ps_get_hyp(ps, nil); hyp != nil {
		p.out.WriteString(C.GoString(hyp))
		p.out.WriteByte('\n')
	}
	frate := C.float(p.d.frate)
	for it := C.ps_seg_iter(ps); it != nil; it = C.ps_seg_next(it) {
		var sf, ef C.int32
		C.ps_seg_frames(it, &sf, &ef)
		fmt.Fprintf(&p.out, "%s %.3f %.3f %f\n", C.GoString(C.ps_seg_word(it)),
			float64(C.float(sf)/frate), float64(C.float(ef)/frate), float64(C.psd_conf(p.d, it)))
	}
}
