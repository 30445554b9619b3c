package tui

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
)

// DefaultScrollback is how many lines a pane keeps unless config.toml says
// otherwise.
const DefaultScrollback = 10000

// maxLineBytes caps one stored line; a longer line (a minified file, a
// binary blob) continues on the next line. With the line limit it bounds
// a pane's memory at about scrollback × maxLineBytes.
const maxLineBytes = 2048

// tabWidth is the distance between tab stops when tabs are expanded.
const tabWidth = 8

// outLine is one line of task output, already made safe to draw.
type outLine struct {
	text  string // printable text only: escapes stripped, tabs expanded
	width int    // display width of text
	kind  lineKind

	// The line drawn (wrapped into rows) for one width and style
	// generation; lines never change once stored, so a frame only renders
	// lines it has not drawn before.
	cache    []string
	cacheW   int
	cacheGen int
}

// scrollback is a pane's bounded buffer of output lines: a ring of at most
// limit lines, appended from fan-out goroutines and read by the UI.
//
// Writers are serialised by wmu, which also guards the raw unfinished lines
// and the digest; mu guards what the UI reads. A writer sanitises text
// outside mu so that a frame never waits on it for long.
type scrollback struct {
	wmu     sync.Mutex
	raw     [2][]byte // the unfinished line of stdout and stderr
	digest  maphash.Hash
	written int64 // bytes ever written, both streams

	mu      sync.Mutex
	limit   int
	lines   []outLine // ring: at most limit lines, oldest at head once full
	head    int
	dropped int64     // lines that fell off the top
	tail    [2]string // sanitised unfinished lines, shown after lines
	version uint64    // bumped by every change
	// onChange is called after every change, outside mu.
	onChange func()
}

func newScrollback(limit int, seed maphash.Seed, onChange func()) *scrollback {
	if limit <= 0 {
		limit = DefaultScrollback
	}
	s := &scrollback{limit: limit, onChange: onChange}
	s.digest.SetSeed(seed)
	return s
}

// Write appends output of one stream. It is safe for concurrent use.
func (s *scrollback) Write(stderr bool, data []byte) {
	if len(data) == 0 {
		return
	}
	stream, kind := 0, lineOut
	if stderr {
		stream, kind = 1, lineErr
	}
	s.wmu.Lock()
	s.digest.Write(data)
	s.written += int64(len(data))
	var done []outLine
	raw := s.raw[stream]
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			raw = append(raw, data...)
			// A line without end is cut at maxLineBytes, on a rune boundary.
			for len(raw) > maxLineBytes {
				cut := maxLineBytes
				for cut > 0 && !utf8.RuneStart(raw[cut]) {
					cut--
				}
				if cut == 0 {
					cut = maxLineBytes
				}
				done = append(done, makeLine(raw[:cut], kind))
				raw = append(raw[:0], raw[cut:]...)
			}
			break
		}
		line := data[:i]
		if len(raw) > 0 {
			raw = append(raw, line...)
			line = raw
		}
		for len(line) > maxLineBytes {
			cut := maxLineBytes
			for cut > 0 && !utf8.RuneStart(line[cut]) {
				cut--
			}
			if cut == 0 {
				cut = maxLineBytes
			}
			done = append(done, makeLine(line[:cut], kind))
			line = line[cut:]
		}
		done = append(done, makeLine(line, kind))
		raw = raw[:0]
		data = data[i+1:]
	}
	s.raw[stream] = raw
	tail := ""
	if len(raw) > 0 {
		tail = sanitize(raw)
	}
	s.mu.Lock()
	s.pushLocked(done)
	s.tail[stream] = tail
	s.version++
	s.mu.Unlock()
	s.wmu.Unlock()
	if s.onChange != nil {
		s.onChange()
	}
}

// Note appends whole lines that rex itself reports (an error, a message)
// after the output, finishing any unfinished output line first.
func (s *scrollback) Note(kind lineKind, text string) {
	s.wmu.Lock()
	var done []outLine
	for i := range s.raw {
		if len(s.raw[i]) > 0 {
			done = append(done, makeLine(s.raw[i], streamKind(i)))
			s.raw[i] = s.raw[i][:0]
		}
	}
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		done = append(done, makeLine([]byte(l), kind))
	}
	s.mu.Lock()
	s.pushLocked(done)
	s.tail = [2]string{}
	s.version++
	s.mu.Unlock()
	s.wmu.Unlock()
	if s.onChange != nil {
		s.onChange()
	}
}

// Flush ends unfinished lines (the command ended without a newline).
func (s *scrollback) Flush() {
	s.wmu.Lock()
	var done []outLine
	for i := range s.raw {
		if len(s.raw[i]) > 0 {
			done = append(done, makeLine(s.raw[i], streamKind(i)))
			s.raw[i] = s.raw[i][:0]
		}
	}
	s.mu.Lock()
	s.pushLocked(done)
	s.tail = [2]string{}
	s.version++
	s.mu.Unlock()
	s.wmu.Unlock()
}

func (s *scrollback) pushLocked(done []outLine) {
	if len(done) > s.limit {
		s.dropped += int64(len(done) - s.limit)
		done = done[len(done)-s.limit:]
	}
	for _, l := range done {
		if len(s.lines) < s.limit {
			s.lines = append(s.lines, l)
			continue
		}
		s.lines[s.head] = l
		s.head++
		if s.head == s.limit {
			s.head = 0
		}
		s.dropped++
	}
}

// Clear empties the buffer (the digest keeps counting: it describes all
// output, for the gathered view).
func (s *scrollback) Clear() {
	s.wmu.Lock()
	s.raw = [2][]byte{}
	s.mu.Lock()
	s.dropped += int64(len(s.lines))
	s.lines, s.head, s.tail = nil, 0, [2]string{}
	s.version++
	s.mu.Unlock()
	s.wmu.Unlock()
}

// Sum returns a digest of everything written and how many bytes that was.
func (s *scrollback) Sum() (uint64, int64) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.digest.Sum64(), s.written
}

// lenLocked is the number of visible lines: stored ones plus unfinished.
func (s *scrollback) lenLocked() int {
	n := len(s.lines)
	for _, t := range s.tail {
		if t != "" {
			n++
		}
	}
	return n
}

// lineLocked returns visible line i (0 is the oldest kept). The pointer is
// valid until mu is released; a tail line has no cache.
func (s *scrollback) lineLocked(i int, scratch *outLine) *outLine {
	if i < len(s.lines) {
		j := s.head + i
		if j >= len(s.lines) {
			j -= len(s.lines)
		}
		return &s.lines[j]
	}
	i -= len(s.lines)
	for k, t := range s.tail {
		if t == "" {
			continue
		}
		if i == 0 {
			*scratch = outLine{text: t, width: textWidth(t), kind: streamKind(k), cacheW: -1}
			return scratch
		}
		i--
	}
	*scratch = outLine{cacheW: -1}
	return scratch
}

// Text returns every kept line joined by newlines, for the gathered view
// and for tests.
func (s *scrollback) Text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	var scratch outLine
	for i := range s.lenLocked() {
		b.WriteString(s.lineLocked(i, &scratch).text)
		b.WriteByte('\n')
	}
	return b.String()
}

func makeLine(raw []byte, kind lineKind) outLine {
	t := sanitize(raw)
	return outLine{text: t, width: textWidth(t), kind: kind, cacheW: -1}
}

// textWidth is the display width of sanitised text: its length when it is
// ASCII (the common case, and much cheaper than grapheme segmentation).
func textWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// sanitize turns raw output into text that is safe to draw in a cell grid:
// a carriage return keeps what follows it (progress bars redraw a line that
// way), escape sequences go, tabs become spaces, other control characters
// and invalid UTF-8 become U+FFFD.
func sanitize(raw []byte) string {
	if n := len(raw); n > 0 && raw[n-1] == '\r' {
		raw = raw[:n-1]
	}
	clean := true
	for _, c := range raw {
		if c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return string(raw)
	}
	s := string(raw)
	if i := strings.LastIndexByte(s, '\r'); i >= 0 {
		s = s[i+1:]
	}
	if strings.IndexByte(s, 0x1b) >= 0 || strings.Contains(s, "\u009b") {
		s = ansi.Strip(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	col := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '\t':
			n := tabWidth - col%tabWidth
			b.WriteString("        "[:n])
			col += n
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
			b.WriteRune(utf8.RuneError)
			col++
		default:
			b.WriteRune(r)
			col++
		}
	}
	return b.String()
}

func streamKind(stream int) lineKind {
	if stream == 1 {
		return lineErr
	}
	return lineOut
}

// touch tells the console the pane changed without new output (its status
// did).
func (s *scrollback) touch() {
	if s.onChange != nil {
		s.onChange()
	}
}
