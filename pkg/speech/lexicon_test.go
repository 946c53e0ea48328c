package speech

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLexiconKeepsTheModelsWords checks the trimmed dictionary: every
// entry of a word the language model knows (alternative pronunciations
// included) and every one-phone entry, nothing else, in the dictionary's
// order.
func TestLexiconKeepsTheModelsWords(t *testing.T) {
	dir := t.TempDir()
	dict := filepath.Join(dir, "test.dict")
	if err := os.WriteFile(dict, []byte("a AH\na(2) EY\nzyx Z IH K S\nthe DH AH\nthe(2) DH IY\noie OY\nunknown AH N N OW N\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lm := filepath.Join(dir, "test.lm.bin")
	body := []byte("Trie Language Model\x03")
	body = append(body, 4, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0) // 4 unigrams, 9 bigrams, 1 trigram
	body = append(body, "\x00\x07binary\xff trie\x00"...)
	body = append(body, "<s>\x00</s>\x00a\x00the\x00"...)
	if err := os.WriteFile(lm, body, 0o644); err != nil {
		t.Fatal(err)
	}
	words, err := lmVocabulary(lm)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(words, []string{"<s>", "</s>", "a", "the"}) {
		t.Errorf("words %q", words)
	}
	out := filepath.Join(dir, "out.dict")
	if err := writeTrimmedLexicon(dict, lm, out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out)
	if want := "a AH\na(2) EY\nthe DH AH\nthe(2) DH IY\noie OY\n"; string(got) != want {
		t.Errorf("trimmed dictionary\n%s\nwant\n%s", got, want)
	}
	for name, bad := range map[string][]byte{
		"not a trie":       []byte("ARPA\n\\data\\\n"),
		"no words at end":  append([]byte("Trie Language Model\x01\x02\x00\x00\x00"), "junk\x00"...),
		"unreadable words": append([]byte("Trie Language Model\x01\x02\x00\x00\x00\x00"), "<s>\x00a b\x00"...),
	} {
		p := filepath.Join(dir, "bad.lm.bin")
		if err := os.WriteFile(p, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := lmVocabulary(p); err == nil {
			t.Errorf("%s: read as a language model", name)
		}
	}
	if got := lexiconArgs([]string{"-dict", "/x.dict"}); got != nil {
		t.Errorf("a chosen dictionary is replaced: %q", got)
	}
}

func TestLexiconInTheSharedFolderMustBeOurs(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine.dict")
	open := filepath.Join(dir, "open.dict")
	link := filepath.Join(dir, "link.dict")
	for _, f := range []string{mine, open} {
		if err := os.WriteFile(f, []byte("a AH\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{mine: true, open: false, link: false} {
		fi, err := os.Lstat(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := trustedLexicon(fi); got != want {
			t.Errorf("trustedLexicon(%s) = %v, want %v", filepath.Base(f), got, want)
		}
	}
}
