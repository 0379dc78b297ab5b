// Package tokens counts the tokens of a card's text with the tokenizers
// of OpenAI's models, offline: the encodings are embedded in the binary
// (tiktoken-go-loader), never downloaded.
package tokens

import (
	"errors"
	"fmt"
	"slices"
	"sync"

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
	if text == "" {
		return 0, nil
	}
	return len(enc.EncodeOrdinary(text)), nil
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
