package tokens

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
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

// pieces keeps every run without whitespace within maxRun and every piece
// near maxPiece, loses no byte, and cuts ordinary text only before
// whitespace, where the count of the pieces is the count of the whole.
func TestPieces(t *testing.T) {
	prose := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n", 600)
	for _, tt := range []struct {
		name, text string
		exact      bool
	}{
		{"empty", "", true},
		{"prose", prose, true},
		{"one letter", strings.Repeat("x", 512<<10), false},
		{"one mark", strings.Repeat("=", 100<<10), false},
		{"multibyte", strings.Repeat("é", 10<<10), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ps := pieces(tt.text)
			if got := strings.Join(ps, ""); got != tt.text {
				t.Fatalf("pieces lose bytes: %d of %d", len(got), len(tt.text))
			}
			for _, p := range ps {
				if !utf8.ValidString(p) {
					t.Fatalf("a piece cuts a rune: %q", p[:min(len(p), 16)])
				}
				run := 0
				for _, r := range p {
					if unicode.IsSpace(r) {
						run = 0
					} else if run += utf8.RuneLen(r); run > maxRun+utf8.UTFMax {
						t.Fatalf("a run of %d bytes without whitespace", run)
					}
				}
				if len(p) > maxPiece+maxRun+utf8.UTFMax {
					t.Fatalf("a piece of %d bytes", len(p))
				}
			}
			if !tt.exact {
				return
			}
			enc, err := encoders["cl100k_base"]()
			if err != nil {
				t.Fatal(err)
			}
			n, err := Count("cl100k_base", tt.text)
			if whole := len(enc.EncodeOrdinary(tt.text)); err != nil || n != whole {
				t.Fatalf("count %d (%v), the whole text's %d", n, err, whole)
			}
		})
	}
}
