package chain

import "strings"

// shellQuote quotes s for a POSIX shell as one word: inside single quotes
// nothing is special, and a single quote itself is closed, escaped and
// reopened. Every value substituted into a shell string goes through it,
// whatever it contains.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
