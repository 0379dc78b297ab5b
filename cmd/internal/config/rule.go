package config

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Rule checks a flag's value (what its flag.Getter returns); a nil Rule
// accepts every value.
type Rule func(v any) error

// Positive accepts numbers and durations above 0.
var Positive Rule = func(v any) error {
	if n, ok := number(v); ok && n <= 0 {
		return errors.New("must be above 0")
	}
	return nil
}

// NonNegative accepts numbers and durations of 0 or more.
var NonNegative Rule = func(v any) error {
	if n, ok := number(v); ok && n < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

// Fraction accepts numbers above 0 and at most 1.
var Fraction Rule = func(v any) error {
	if n, ok := number(v); ok && (n <= 0 || n > 1) {
		return errors.New("must be above 0 and at most 1")
	}
	return nil
}

// OneOf accepts the words given.
func OneOf(words ...string) Rule {
	return func(v any) error {
		s, _ := v.(string)
		if slices.Contains(words, s) {
			return nil
		}
		return fmt.Errorf("want %s or %s", strings.Join(words[:len(words)-1], ", "), words[len(words)-1])
	}
}

// number is v as a float64 when v is a number or a duration.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	case time.Duration:
		return float64(n), true
	}
	return 0, false
}

// Check applies rule to the value of fs's flag name; the error names the
// flag and, when env is not empty, the variable the value came from.
func Check(fs *flag.FlagSet, name, env string, rule Rule) error {
	f := fs.Lookup(name)
	if rule == nil || f == nil {
		return nil
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return nil
	}
	err := rule(g.Get())
	if err == nil {
		return nil
	}
	if env != "" {
		return fmt.Errorf("%s=%s (--%s): %w", env, f.Value, name, err)
	}
	return fmt.Errorf("--%s %s: %w", name, f.Value, err)
}
