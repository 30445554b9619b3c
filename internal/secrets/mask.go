package secrets

import (
	"bytes"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaskText is what replaces a secret's value in output.
const MaskText = "***"

// Mask replaces every value in s with ***, the longest at each place first.
func Mask(s string, values []string) string {
	var vs [][]byte
	for _, v := range sortedValues(values) {
		vs = append(vs, []byte(v))
	}
	out, _ := scan([]byte(s), vs, true)
	return string(out)
}

// sortedValues puts longer values first, so a value that contains another
// is masked whole.
func sortedValues(values []string) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" {
			out = append(out, v)
			// A terminal turns each newline into CR LF (ONLCR): a
			// multi-line value reaches a terminal pane that way.
			if strings.Contains(v, "\n") {
				out = append(out, strings.ReplaceAll(v, "\n", "\r\n"))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// Masker is a writer that replaces secret values with *** on their way
// through, also when a value arrives split across writes: it holds back
// only the end of the stream that could still be the start of a value, and
// writes it on Flush.
type Masker struct {
	w      io.Writer
	values [][]byte
	mu     sync.Mutex
	held   []byte
	// hold bounds how long held bytes wait for more output (HoldAtMost);
	// timer writes them when it passes.
	hold  time.Duration
	timer *time.Timer
}

// HoldAtMost bounds how long the masker holds back the end of the stream
// that could begin a value: after d without more output it writes it as
// it is. A terminal needs this, or a prompt or a typed character that
// happens to begin a secret's value would not show until the next
// output; the cost is that a value whose rest arrives more than d later
// is not masked. Call it before the first Write.
func (m *Masker) HoldAtMost(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hold = d
}

// NewMasker wraps w; with no values it passes everything through.
func NewMasker(w io.Writer, values []string) *Masker {
	m := &Masker{w: w}
	for _, v := range sortedValues(values) {
		m.values = append(m.values, []byte(v))
	}
	return m
}

// Write masks p (with what was held back) and writes all that can no
// longer be part of a value.
func (m *Masker) Write(p []byte) (int, error) {
	if len(m.values) == 0 {
		return m.w.Write(p)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out, held := scan(append(m.held, p...), m.values, false)
	m.held = append([]byte(nil), held...)
	if m.hold > 0 {
		switch {
		case len(m.held) == 0 && m.timer != nil:
			m.timer.Stop()
		case len(m.held) > 0 && m.timer == nil:
			m.timer = time.AfterFunc(m.hold, func() { m.Flush() })
		case len(m.held) > 0:
			m.timer.Reset(m.hold)
		}
	}
	if _, err := m.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// scan masks buf from left to right, at each place the longest value that
// matches. Unless final, it stops where the rest of buf could still grow
// into a value (or into a longer one than matches now) and returns that
// rest to hold back.
func scan(buf []byte, values [][]byte, final bool) (out, held []byte) {
	out = make([]byte, 0, len(buf))
	for i := 0; i < len(buf); {
		rest := buf[i:]
		if !final {
			pending := false
			for _, v := range values {
				if len(rest) < len(v) && bytes.HasPrefix(v, rest) {
					pending = true
					break
				}
			}
			if pending {
				return out, rest
			}
		}
		matched := false
		for _, v := range values { // longest first
			if bytes.HasPrefix(rest, v) {
				out = append(out, MaskText...)
				i += len(v)
				matched = true
				break
			}
		}
		if !matched {
			out = append(out, buf[i])
			i++
		}
	}
	return out, nil
}

// Flush writes what was held back, masked: at the end of the stream it
// cannot grow any more.
func (m *Masker) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
	}
	if len(m.held) == 0 {
		return nil
	}
	out, _ := scan(m.held, m.values, true)
	m.held = nil
	_, err := m.w.Write(out)
	return err
}
