package textsafe

import "testing"

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                     "plain",
		"a\x1b]0;owned\abc":         "a?]0;owned?bc",
		"two\nlines\tand\x7f\u009b": "two?lines?and??",
		"ünïcode ✓":                 "ünïcode ✓",
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}
