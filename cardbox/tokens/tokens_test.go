package tokens

import (
	"errors"
	"testing"
)

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		name, text string
		want       int
	}{
		{"cl100k_base", "", 0},
		{"cl100k_base", "hello world", 2},
		{"o200k_base", "hello world", 2},
		{"cl100k_base", "Please summarize this report", 4},
	} {
		got, err := Count(tt.name, tt.text)
		if err != nil || got != tt.want {
			t.Errorf("Count(%s, %q) = %d, %v; want %d", tt.name, tt.text, got, err, tt.want)
		}
	}
}

func TestUnknownTokenizer(t *testing.T) {
	_, err := Count("gpt2", "x")
	var ue *UnknownError
	if !errors.As(err, &ue) || ue.Name != "gpt2" || Known("gpt2") {
		t.Fatalf("Count(gpt2) error = %v", err)
	}
}

func TestCountAllMatchesCount(t *testing.T) {
	for _, text := range []string{"", "hello world", "Please summarize this report"} {
		all, err := CountAll(text)
		if err != nil || len(all) != len(Names) {
			t.Fatalf("CountAll(%q) = %v, %v", text, all, err)
		}
		for i, name := range Names {
			if n, err := Count(name, text); err != nil || n != all[i] {
				t.Errorf("CountAll(%q)[%s] = %d, Count = %d, %v", text, name, all[i], n, err)
			}
		}
	}
}
