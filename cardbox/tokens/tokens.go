// Package tokens counts the tokens of a card's text with the tokenizers
// of OpenAI's models, offline: the encodings are embedded in the binary
// (tiktoken-go-loader), never downloaded.
package tokens

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Names are the known tokenizers, sorted.
var Names = []string{"cl100k_base", "o200k_base"}

func init() {
	// The default loader downloads the encodings; this one reads the
	// copies embedded in the binary.
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
}

// encoders holds each tokenizer, loaded on first use, once per process:
// each takes tens of megabytes and about half a second of CPU to build
// (several seconds under the race detector), so nothing loads them before
// a count needs them.
var encoders = func() map[string]func() (*tiktoken.Tiktoken, error) {
	m := make(map[string]func() (*tiktoken.Tiktoken, error), len(Names))
	for _, name := range Names {
		m[name] = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
			enc, err := tiktoken.GetEncoding(name)
			if err != nil {
				return nil, fmt.Errorf("load tokenizer %s: %w", name, err)
			}
			return enc, nil
		})
	}
	return m
}()

// loadAll loads every tokenizer at once, each on its own goroutine (they
// build in parallel on a machine with cores to spare), and waits for them.
var loadAll = sync.OnceValue(func() error {
	errs := make([]error, len(Names))
	var wg sync.WaitGroup
	for i, name := range Names {
		wg.Go(func() { _, errs[i] = encoders[name]() })
	}
	wg.Wait()
	return errors.Join(errs...)
})

// UnknownError names a tokenizer that is not one of Names.
type UnknownError struct{ Name string }

func (e *UnknownError) Error() string {
	return fmt.Sprintf("unknown tokenizer %q; known: %v", e.Name, Names)
}

// Known reports whether name is one of Names.
func Known(name string) bool { return slices.Contains(Names, name) }

// Count returns the number of tokens of text under tokenizer name.
func Count(name, text string) (int, error) {
	load, ok := encoders[name]
	if !ok {
		return 0, &UnknownError{Name: name}
	}
	enc, err := load()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, piece := range pieces(text) {
		n += len(enc.EncodeOrdinary(piece))
	}
	return n, nil
}

const (
	// maxPiece is about how much text is encoded at once: pieces end
	// before a whitespace once they are this long, where the tokenizers
	// split words anyway, so the count is the same as of the whole.
	maxPiece = 8 << 10
	// maxRun is the longest run without whitespace encoded at once. Byte
	// pair merging is quadratic in the length of a word: a card of 512 KiB
	// of one letter took minutes. Runs are cut at this length (tokens are
	// far shorter), which may change the count of such a run by a token
	// at each cut.
	maxRun = 128
)

// pieces cuts text where encoding each piece apart gives its count (or
// within a token of it, for runs longer than maxRun).
func pieces(text string) []string {
	var out []string
	start, run := 0, 0
	for i, r := range text {
		switch {
		case unicode.IsSpace(r):
			if i-start >= maxPiece {
				out, start = append(out, text[start:i]), i
			}
			run = i + utf8.RuneLen(r)
		case i-run >= maxRun:
			out, start, run = append(out, text[start:i]), i, i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// CountAll returns the number of tokens of text under each of Names, in
// order; the first call loads the tokenizers not loaded yet, in parallel.
func CountAll(text string) ([]int, error) {
	if err := loadAll(); err != nil {
		return nil, err
	}
	counts := make([]int, len(Names))
	for i, name := range Names {
		n, err := Count(name, text)
		if err != nil {
			return nil, err
		}
		counts[i] = n
	}
	return counts, nil
}
