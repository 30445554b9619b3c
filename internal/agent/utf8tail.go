package agent

import (
	"sync"
	"unicode/utf8"
)

// textJoiner turns a tool's output chunks into text of whole characters
// per host and stream: rexd's raw output frames may end inside a
// character, and an event's Data is a string of its own (rex ask --json
// prints each), so the start of a character waits for its end.
type textJoiner struct {
	mu   sync.Mutex
	held map[string][]byte // by host and stream
}

// text returns what of data (after the bytes held for key) is whole
// characters, holding back an unfinished one at the end.
func (j *textJoiner) text(key string, data []byte) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	b := data
	if held := j.held[key]; len(held) > 0 {
		b = append(held, data...)
		delete(j.held, key)
	}
	cut := wholeRunes(b)
	if cut < len(b) {
		if j.held == nil {
			j.held = map[string][]byte{}
		}
		j.held[key] = append([]byte(nil), b[cut:]...)
	}
	return string(b[:cut])
}

// flush returns and forgets what is held for key (the stream ended).
func (j *textJoiner) flush(key string) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := string(j.held[key])
	delete(j.held, key)
	return s
}

// wholeRunes is the length of b without an unfinished character at its
// end; bytes that can never start a valid one are not held.
func wholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
