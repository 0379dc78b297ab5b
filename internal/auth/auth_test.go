package auth

import (
	"strings"
	"testing"

	"github.com/cardboxhq/cardbox/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestSplitClientTag(t *testing.T) {
	tests := []struct{ tag, clean, secret string }{
		{"agent-7", "agent-7", ""},
		{"agent-7;key=cbk_key_x_y", "agent-7", "cbk_key_x_y"},
		{"cbk_key_0123456789abcdef_zzz", "", "cbk_key_0123456789abcdef_zzz"},
		{";key=s", "", "s"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if clean, secret := SplitClientTag(tt.tag); clean != tt.clean || secret != tt.secret {
			t.Errorf("SplitClientTag(%q) = %q, %q; want %q, %q", tt.tag, clean, secret, tt.clean, tt.secret)
		}
	}
}

func TestSecretFormat(t *testing.T) {
	id, secret, _ := NewSecret()
	if got, ok := KeyIDOf(secret); !ok || got != id {
		t.Errorf("KeyIDOf(%q) = %q, %v; want %q", secret, got, ok, id)
	}
	for _, bad := range []string{"", "cbk_", secret[:len(secret)-1], strings.Replace(secret, "key_", "kez_", 1), "cbk_key_zzzzzzzzzzzzzzzz_" + secret[len(secret)-43:]} {
		if _, ok := KeyIDOf(bad); ok {
			t.Errorf("KeyIDOf(%q) accepted", bad)
		}
	}
}
