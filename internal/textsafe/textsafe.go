// Package textsafe makes text from elsewhere (a host's output, a shared
// registry, a model) safe to print on one line of the operator's terminal.
package textsafe

import (
	"strings"
	"unicode"
)

// Line replaces control characters (an ESC starts an escape sequence; a
// newline or tab would break a sentence or a table) with '?'.
func Line(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
