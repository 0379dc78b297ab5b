package rules

import (
	"errors"
	"fmt"
	"strings"
)

// Domain errors. Every error cardbox returns for a caller mistake wraps
// one of these; test with errors.Is.
var (
	// ErrInvalid: the request breaks a validation rule (see ValidationError).
	ErrInvalid = errors.New("Invalid request")
	// ErrNotFound: the card or box does not exist in the project, or is
	// deleted (cards: or expired).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a card id is reused with different content (cards are
	// immutable); see ConflictError.
	ErrConflict = errors.New("conflict")
	// ErrUnknownCard: a box write names cards that are not live cards of the
	// project; see UnknownCardsError.
	ErrUnknownCard = errors.New("unknown card")
)

// ValidationError says which field of a request is wrong and why. It
// matches ErrInvalid.
type ValidationError struct {
	// Field is the path of the field, e.g. "cards[2].metadata.type".
	Field string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Invalid builds a ValidationError.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Within prefixes the field of a ValidationError with prefix (e.g. the index
// of a card in a batch); other errors pass unchanged.
func Within(prefix string, err error) error {
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	field := prefix
	if ve.Field != "" {
		field += "." + ve.Field
	}
	return &ValidationError{Field: field, Reason: ve.Reason}
}

// ConflictError lists card ids that already exist with different content.
// It matches ErrConflict.
type ConflictError struct {
	CardIDs []string
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("cards are immutable; these ids exist with different content: %s",
		quoteList(e.CardIDs))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// UnknownCardsError lists card ids named by a box write that are not live
// cards of the project. It matches ErrUnknownCard.
type UnknownCardsError struct {
	CardIDs []string
}

// Error implements error.
func (e *UnknownCardsError) Error() string {
	return fmt.Sprintf("unknown card ids (absent, deleted or expired in this project): %s",
		quoteList(e.CardIDs))
}

// Is makes errors.Is(err, ErrUnknownCard) true.
func (e *UnknownCardsError) Is(target error) bool { return target == ErrUnknownCard }

// NotFound wraps ErrNotFound with what was looked for.
func NotFound(kind, id string) error {
	return fmt.Errorf("%s %q: %w", kind, id, ErrNotFound)
}

func quoteList(ids []string) string {
	const max = 10
	q := make([]string, 0, min(len(ids), max))
	for i, id := range ids {
		if i == max {
			break
		}
		q = append(q, fmt.Sprintf("%q", id))
	}
	s := strings.Join(q, ", ")
	if len(ids) > max {
		s += fmt.Sprintf(" and %d more", len(ids)-max)
	}
	return s
}
