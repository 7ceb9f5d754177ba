package cli

import (
	"bytes"
	"testing"
)

// TestBlankLine: the first-byte shortcut agrees with bytes.TrimSpace on
// every kind of start, Unicode white space included.
func TestBlankLine(t *testing.T) {
	for _, s := range []string{"", " ", "\t", "\r", "\v\f", "  \t ", "\u00a0", "\u0085", "\u2028 \u3000",
		"{}", `{"a":1}`, " {}", "\t{}", "a,b", "\u00a0x", "é", "\u3000{}", "0", "\x00", "\x7f"} {
		want := len(bytes.TrimSpace([]byte(s))) == 0
		if got := blankLine([]byte(s)); got != want {
			t.Errorf("blankLine(%q) = %v, bytes.TrimSpace says %v", s, got, want)
		}
	}
}
