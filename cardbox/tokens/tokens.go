// Package tokens counts the tokens of a card's text with the tokenizers
// of OpenAI's models, offline: the encodings are embedded in the binary
// (tiktoken-go-loader), never downloaded.
package tokens

import (
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

// encoders holds each tokenizer, loaded on first use (each takes tens of
// megabytes and a fraction of a second to build).
var encoders = func() map[string]func() (*tiktoken.Tiktoken, error) {
	m := make(map[string]func() (*tiktoken.Tiktoken, error), len(Names))
	for _, name := range Names {
		m[name] = sync.OnceValues(func() (*tiktoken.Tiktoken, error) { return tiktoken.GetEncoding(name) })
	}
	return m
}()

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
		return 0, fmt.Errorf("load tokenizer %s: %w", name, err)
	}
	if text == "" {
		return 0, nil
	}
	return len(enc.EncodeOrdinary(text)), nil
}
