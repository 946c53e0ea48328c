package speech

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// Where Debian's pocketsphinx-en-us puts the dictionary and the language
// model that pocketsphinx_continuous loads without -dict and -lm.
const (
	defaultDict = "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"
	defaultLM   = "/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"
)

// The decoder's start-up is mostly loading its model: reading the 27 MB
// language model and hashing the dictionary's 134,723 pronunciations,
// about 0.4 CPU-s for every file decoded by a command. Its search only
// ever proposes words the language model knows (72,547 of them), so the
// other 55,300 pronunciations are loaded for nothing. lexiconArgs gives
// the decoder a dictionary of the entries the language model knows, made
// once per machine from the installed files: the same transcripts and
// timings (TestLexiconDecodesTheSame), 0.06 CPU-s less a start.

// lexiconArgs returns -dict and the trimmed dictionary for a decoder run
// with args, or nothing when args choose their own dictionary, language
// model or search, or the trimmed dictionary cannot be made (the decoder
// then loads the whole one, as before).
func lexiconArgs(args []string) []string {
	for _, a := range args {
		switch a {
		case "-dict", "-lm", "-lmctl", "-jsgf", "-fsg", "-kws", "-keyphrase", "-allphone", "-fdict":
			return nil
		}
	}
	path := trimmedLexicon(defaultDict, defaultLM)
	if path == "" {
		return nil
	}
	return []string{"-dict", path}
}

var lexicons struct {
	sync.Mutex
	made map[string]string // dict and LM → the trimmed dictionary
}

// trimmedLexicon returns the path of dict trimmed to the words of lm,
// making it when it does not exist yet; "" when it cannot be made. The
// file is named after the sources (path, size, time), shared by every
// process on the machine, written whole before it is renamed into place.
func trimmedLexicon(dict, lm string) string {
	key := dict + "\x00" + lm
	lexicons.Lock()
	defer lexicons.Unlock()
	if p, ok := lexicons.made[key]; ok {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	h := sha256.New()
	for _, f := range []string{dict, lm} {
		fi, err := os.Stat(f)
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", f, fi.Size(), fi.ModTime().UnixNano())
	}
	path := filepath.Join(os.TempDir(), "dubflow-lexicon-"+hex.EncodeToString(h.Sum(nil))[:16]+".dict")
	if fi, err := os.Lstat(path); err != nil {
		if err := writeTrimmedLexicon(dict, lm, path); err != nil {
			return ""
		}
	} else if !trustedLexicon(fi) {
		return "" // someone else's file in a shared folder: the whole dictionary, as before
	} else if f, err := os.Open(path); err != nil {
		return "" // root's, and not readable by this user
	} else {
		f.Close()
	}
	if lexicons.made == nil {
		lexicons.made = map[string]string{}
	}
	lexicons.made[key] = path
	return path
}

// trustedLexicon: a dictionary found in the shared temporary folder is used
// only when it is a regular file of this process's user (or root's) that
// nobody else may write: another user could otherwise plant a dictionary
// that changes every transcript.
func trustedLexicon(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode().IsRegular() && fi.Mode().Perm()&0o022 == 0 &&
		(st.Uid == uint32(os.Getuid()) || st.Uid == 0)
}

// writeTrimmedLexicon writes to path the entries of dict whose word (an
// alternative pronunciation "word(2)" counts as word) is in lm, and every
// one-phone entry (the decoder handles those apart from its tree).
func writeTrimmedLexicon(dict, lm, path string) error {
	vocab, err := lmVocabulary(lm)
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(vocab))
	for _, w := range vocab {
		known[w] = true
	}
	in, err := os.ReadFile(dict)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	kept := 0
	for line := range strings.Lines(string(in)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		word := f[0]
		if i := strings.IndexByte(word, '('); i > 0 && strings.HasSuffix(word, ")") {
			word = word[:i]
		}
		if known[word] || len(f) == 2 {
			out.WriteString(strings.TrimRight(line, "\r\n"))
			out.WriteByte('\n')
			kept++
		}
	}
	if kept == 0 {
		return fmt.Errorf("lexicon: no word of %s is in %s", dict, lm)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dubflow-lexicon-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(out.Bytes())
	if err == nil {
		err = tmp.Chmod(0o644) // every worker on the machine reads it
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// lmVocabulary reads the words of a language model in pocketsphinx's
// binary trie format: a header ("Trie Language Model", the order, then
// the count of each order's n-grams as 32-bit little-endian numbers) and,
// at the end of the file, the unigrams' words, each ended by a NUL.
func lmVocabulary(lm string) ([]string, error) {
	f, err := os.Open(lm)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	const magic = "Trie Language Model"
	head := make([]byte, len(magic)+1)
	if _, err := io.ReadFull(r, head); err != nil || string(head[:len(magic)]) != magic {
		return nil, fmt.Errorf("lexicon: %s is not a trie language model", lm)
	}
	order := int(head[len(magic)])
	if order < 1 || order > 8 {
		return nil, fmt.Errorf("lexicon: %s: order %d", lm, order)
	}
	var unigrams uint32
	if err := binary.Read(r, binary.LittleEndian, &unigrams); err != nil {
		return nil, fmt.Errorf("lexicon: %s: %w", lm, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// The words take at most this much: 64 bytes a word is plenty.
	size := min(fi.Size(), int64(unigrams)*64)
	tail := make([]byte, size)
	if _, err := f.ReadAt(tail, fi.Size()-size); err != nil {
		return nil, fmt.Errorf("lexicon: %s: %w", lm, err)
	}
	if len(tail) == 0 || tail[len(tail)-1] != 0 {
		return nil, fmt.Errorf("lexicon: %s does not end with its words", lm)
	}
	parts := bytes.Split(tail[:len(tail)-1], []byte{0})
	if len(parts) <= int(unigrams) {
		return nil, fmt.Errorf("lexicon: %s: fewer than %d words at its end", lm, unigrams)
	}
	var words []string
	for _, w := range parts[len(parts)-int(unigrams):] {
		if len(w) == 0 || bytes.ContainsFunc(w, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return nil, fmt.Errorf("lexicon: %s: unreadable word %q at its end", lm, w)
		}
		words = append(words, string(w))
	}
	if !slices.Contains(words, "<s>") || !slices.Contains(words, "</s>") {
		return nil, fmt.Errorf("lexicon: %s: no sentence markers among its words", lm)
	}
	return words, nil
}
