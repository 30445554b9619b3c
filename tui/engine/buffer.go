package engine

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// DefaultScrollback is how many lines a task pane keeps unless config.toml
// says otherwise.
const DefaultScrollback = 10000

// MaxLineBytes caps one stored line; a longer line (a minified file, a
// binary blob) continues on the next line. With the line limit it bounds
// a buffer's memory at about limit × MaxLineBytes.
const MaxLineBytes = 2048

// maxSpans caps the coloured runs kept for one line; the rest of a line
// that changes colour more often than that is drawn plain. It bounds what
// colour can cost at about maxSpans × 64 bytes a line.
const maxSpans = 64

// tabWidth is the distance between tab stops when tabs are expanded.
const tabWidth = 8

// Kind is what a line is, which picks its style.
type Kind uint8

const (
	Out        Kind = iota // standard output
	Err                    // standard error
	Note                   // what rex says about the task
	Head                   // a group heading of the gathered view
	HeadOdd                // a heading of a group that differs
	Command                // a transcript's "❯ command · time" line
	StatusOK               // a transcript's line saying a command ended well
	StatusFail             // … or not
	Marker                 // "… N earlier lines dropped"
	Kinds                  // how many kinds there are
)

// Span colours Text[Start:End] as the program's own SGR sequences did.
type Span struct {
	Start, End int
	Style      uv.Style
}

// Line is one line of output, made safe to draw: every control sequence
// but colour is gone, tabs are expanded, and colours are kept apart from
// the text as spans.
type Line struct {
	Text  string // printable text only
	Width int    // display width of Text
	Kind  Kind
	Spans []Span // nil for a line without colour

	// Drawn is the line as a front end last drew it; lines never change
	// once stored, so a frame draws only lines it has not drawn before.
	// The engine never reads it.
	Drawn *Drawn
}

// Drawn is a line's rendering for one width and style generation.
type Drawn struct {
	Rows  []string
	Width int
	Gen   int
}

// stream is the unfinished line of one output stream.
type stream struct {
	raw []byte
	// pen is the colour in force where raw starts: a program may set a
	// colour on one line and reset it lines later.
	pen uv.Style
}

// Buffer is one pane's bounded output: a ring of at most limit lines,
// appended to by fan-out goroutines and read by the UI.
//
// Writers are serialised by wmu, which also guards the unfinished lines
// and the digest; mu guards what readers see. A writer parses text
// outside mu, so that a frame never waits on it for long.
type Buffer struct {
	wmu     sync.Mutex
	streams [2]stream
	parser  *ansi.Parser
	digest  maphash.Hash
	written int64 // bytes ever written, both streams

	mu      sync.Mutex
	limit   int
	lines   []Line // ring: at most limit lines, oldest at head once full
	head    int
	dropped int64   // lines that fell off the top
	marker  Line    // "… N earlier lines dropped", while dropped > 0
	tail    [2]Line // the unfinished lines, shown after lines
	version uint64  // bumped by every change
	// onChange is called after every change, outside mu.
	onChange func()
}

// NewBuffer returns a buffer of limit lines (DefaultScrollback if not
// positive); onChange may be nil.
func NewBuffer(limit int, seed maphash.Seed, onChange func()) *Buffer {
	if limit <= 0 {
		limit = DefaultScrollback
	}
	b := &Buffer{limit: limit, onChange: onChange, parser: newParser()}
	b.digest.SetSeed(seed)
	return b
}

func (b *Buffer) changed() {
	if b.onChange != nil {
		b.onChange()
	}
}

// Write appends output of one stream. It is safe for concurrent use.
func (b *Buffer) Write(stderr bool, data []byte) {
	if len(data) == 0 {
		return
	}
	i, kind := 0, Out
	if stderr {
		i, kind = 1, Err
	}
	b.wmu.Lock()
	b.digest.Write(data)
	b.written += int64(len(data))
	s := &b.streams[i]
	var done []Line
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			s.raw = append(s.raw, data...)
			// A line without end is cut at MaxLineBytes, on a rune boundary.
			for len(s.raw) > MaxLineBytes {
				c := cutPoint(s.raw)
				done = append(done, b.makeLine(s.raw[:c], kind, &s.pen))
				s.raw = append(s.raw[:0], s.raw[c:]...)
			}
			break
		}
		line := data[:nl]
		if len(s.raw) > 0 {
			s.raw = append(s.raw, line...)
			line = s.raw
		}
		for len(line) > MaxLineBytes {
			c := cutPoint(line)
			done = append(done, b.makeLine(line[:c], kind, &s.pen))
			line = line[c:]
		}
		done = append(done, b.makeLine(line, kind, &s.pen))
		s.raw = s.raw[:0]
		data = data[nl+1:]
	}
	var tail Line
	if len(s.raw) > 0 {
		pen := s.pen // a tail is parsed afresh at each write
		tail = b.makeLine(s.raw, kind, &pen)
	}
	b.mu.Lock()
	b.pushLocked(done)
	b.tail[i] = tail
	b.version++
	b.mu.Unlock()
	b.wmu.Unlock()
	b.changed()
}

// cutPoint is where an over-long line is cut: MaxLineBytes, moved back to
// a rune's start.
func cutPoint(raw []byte) int {
	c := MaxLineBytes
	for c > 0 && !utf8.RuneStart(raw[c]) {
		c--
	}
	if c == 0 {
		c = MaxLineBytes
	}
	return c
}

// finishLocked ends the unfinished lines; the caller holds wmu.
func (b *Buffer) finishLocked() []Line {
	var done []Line
	for i := range b.streams {
		s := &b.streams[i]
		if len(s.raw) > 0 {
			done = append(done, b.makeLine(s.raw, streamKind(i), &s.pen))
			s.raw = s.raw[:0]
		}
	}
	return done
}

// Note appends whole lines that rex itself reports (an error, a message)
// after the output, finishing any unfinished output line first.
func (b *Buffer) Note(kind Kind, text string) {
	b.wmu.Lock()
	done := b.finishLocked()
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		var pen uv.Style
		done = append(done, b.makeLine([]byte(l), kind, &pen))
	}
	b.mu.Lock()
	b.pushLocked(done)
	b.tail = [2]Line{}
	b.version++
	b.mu.Unlock()
	b.wmu.Unlock()
	b.changed()
}

// Flush ends unfinished lines (the command ended without a newline).
func (b *Buffer) Flush() {
	b.wmu.Lock()
	done := b.finishLocked()
	b.mu.Lock()
	b.pushLocked(done)
	b.tail = [2]Line{}
	b.version++
	b.mu.Unlock()
	b.wmu.Unlock()
}

// Push appends lines made elsewhere (the gathered view copies lines of
// other buffers).
func (b *Buffer) Push(lines []Line) {
	b.mu.Lock()
	b.pushLocked(lines)
	b.version++
	b.mu.Unlock()
	b.changed()
}

func (b *Buffer) pushLocked(done []Line) {
	before := b.dropped
	if len(done) > b.limit {
		b.dropped += int64(len(done) - b.limit)
		done = done[len(done)-b.limit:]
	}
	for _, l := range done {
		if len(b.lines) < b.limit {
			b.lines = append(b.lines, l)
			continue
		}
		b.lines[b.head] = l
		b.head++
		if b.head == b.limit {
			b.head = 0
		}
		b.dropped++
	}
	if b.dropped != before {
		b.setMarkerLocked()
	}
}

func (b *Buffer) setMarkerLocked() {
	text := fmt.Sprintf("… %s earlier %s dropped", groupDigits(b.dropped), pluralWord(b.dropped, "line", "lines"))
	b.marker = Line{Text: text, Width: ansi.StringWidth(text), Kind: Marker}
}

// DropFront removes up to n of the oldest lines, for a transcript that
// keeps its panes within their line limit; it returns how many went.
func (b *Buffer) DropFront(n int) int {
	b.mu.Lock()
	n = min(n, len(b.lines))
	if n <= 0 {
		b.mu.Unlock()
		return 0
	}
	kept := make([]Line, 0, len(b.lines)-n)
	for i := n; i < len(b.lines); i++ {
		kept = append(kept, *b.lineLocked(i))
	}
	b.lines, b.head = kept, 0
	b.dropped += int64(n)
	b.setMarkerLocked()
	b.version++
	b.mu.Unlock()
	b.changed()
	return n
}

// Clear empties the buffer (the digest keeps counting: it describes all
// output, for the gathered view). A cleared buffer says nothing about
// dropped lines: the operator asked for it.
func (b *Buffer) Clear() {
	b.wmu.Lock()
	for i := range b.streams {
		b.streams[i].raw = nil
	}
	b.mu.Lock()
	b.lines, b.head, b.tail = nil, 0, [2]Line{}
	b.dropped, b.marker = 0, Line{}
	b.version++
	b.mu.Unlock()
	b.wmu.Unlock()
	b.changed()
}

// Sum returns a digest of everything written and how many bytes that was.
func (b *Buffer) Sum() (uint64, int64) {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	return b.digest.Sum64(), b.written
}

// Touch tells the front end the buffer's owner changed (a status) without
// new output.
func (b *Buffer) Touch() { b.changed() }

// Len is how many lines are kept, unfinished ones included.
func (b *Buffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.storedLocked()
}

func (b *Buffer) storedLocked() int {
	n := len(b.lines)
	for i := range b.tail {
		if b.tail[i].Text != "" {
			n++
		}
	}
	return n
}

// lineLocked returns stored line i (0 is the oldest kept), unfinished
// lines last.
func (b *Buffer) lineLocked(i int) *Line {
	if i < len(b.lines) {
		j := b.head + i
		if j >= len(b.lines) {
			j -= len(b.lines)
		}
		return &b.lines[j]
	}
	i -= len(b.lines)
	for k := range b.tail {
		if b.tail[k].Text == "" {
			continue
		}
		if i == 0 {
			return &b.tail[k]
		}
		i--
	}
	return &Line{}
}

// Text returns every kept line joined by newlines (no marker), for tests
// and digests.
func (b *Buffer) Text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	for i := range b.storedLocked() {
		s.WriteString(b.lineLocked(i).Text)
		s.WriteByte('\n')
	}
	return s.String()
}

// Read locks the buffer for reading; call Done on the reader when
// finished. Writers wait meanwhile, so read what one frame needs.
func (b *Buffer) Read() BufferReader {
	b.mu.Lock()
	return BufferReader{b: b}
}

// BufferReader reads a locked buffer. Its lines are numbered from 0; the
// first is the "… N earlier lines dropped" marker when lines were
// dropped. Line pointers are valid until Done.
type BufferReader struct{ b *Buffer }

// Len is the number of lines, the marker included.
func (r BufferReader) Len() int {
	n := r.b.storedLocked()
	if r.b.dropped > 0 {
		n++
	}
	return n
}

// Line returns line i.
func (r BufferReader) Line(i int) *Line {
	if r.b.dropped > 0 {
		if i == 0 {
			return &r.b.marker
		}
		i--
	}
	return r.b.lineLocked(i)
}

// Dropped is how many lines were dropped before line 0 (the marker not
// counted): line i is line Dropped()+i of all the buffer ever held.
func (r BufferReader) Dropped() int64 {
	if r.b.dropped > 0 {
		return r.b.dropped - 1
	}
	return 0
}

// Version changes whenever the lines do.
func (r BufferReader) Version() uint64 { return r.b.version }

// Done unlocks the buffer.
func (r BufferReader) Done() { r.b.mu.Unlock() }

func streamKind(i int) Kind {
	if i == 1 {
		return Err
	}
	return Out
}

// makeLine parses a raw line; pen is the colour in force where it starts,
// and is left as in force where it ends.
func (b *Buffer) makeLine(raw []byte, kind Kind, pen *uv.Style) Line {
	text, spans := parseLine(raw, pen, b.parser)
	return Line{Text: text, Width: TextWidth(text), Kind: kind, Spans: spans}
}

// TextWidth is the display width of parsed text: its length when it is
// ASCII (the common case, and much cheaper than grapheme segmentation).
func TextWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return ansi.StringWidth(s)
		}
	}
	return len(s)
}

// Sanitize turns raw bytes into text that is safe to draw in a cell grid,
// without colour: see parseLine.
func Sanitize(raw []byte) string {
	var pen uv.Style
	text, _ := parseLine(raw, &pen, newParser())
	return text
}

// OneLine is s as one line of printable text: Sanitize's rules, and of a
// text of several lines (a model's heredoc, a loop) the first and " …".
// For commands and messages shown in headers, titles and status lines.
func OneLine(s string) string {
	first, rest, more := strings.Cut(strings.TrimRight(s, "\n"), "\n")
	if more && strings.TrimSpace(rest) != "" {
		return Sanitize([]byte(first)) + " …"
	}
	return Sanitize([]byte(first))
}

// newParser returns a parser for parseLine, which reads the parameters of
// SGR sequences and drops every other sequence: the data of OSC, DCS and
// the like is never read, so the parser keeps one byte of it, where
// ansi.NewParser allocates 64 KiB (per buffer, and a pane's every host has
// one).
func newParser() *ansi.Parser {
	p := new(ansi.Parser)
	p.SetParamsSize(parser.MaxParamsSize)
	p.SetDataSize(1) // 0 would mean unlimited
	return p
}

// unsafeAttrs are SGR attributes a pane never draws: blinking text, and
// concealed text that would hide what a program printed.
const unsafeAttrs = uv.AttrBlink | uv.AttrRapidBlink | uv.AttrConceal

// parseLine turns raw output into text that is safe to draw in a cell
// grid, and the colour spans over it: a carriage return keeps what
// follows it (progress bars redraw a line that way); SGR sequences set the
// pen (which goes on to the next line), every other escape sequence goes;
// tabs become spaces; other control characters and invalid UTF-8 become
// U+FFFD.
func parseLine(raw []byte, pen *uv.Style, p *ansi.Parser) (string, []Span) {
	if n := len(raw); n > 0 && raw[n-1] == '\r' {
		raw = raw[:n-1]
	}
	clean := pen.IsZero()
	for _, c := range raw {
		if c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return string(raw), nil
	}
	var out strings.Builder
	out.Grow(len(raw))
	var spans []Span
	col := 0
	// write adds text drawn with the current pen.
	write := func(s string) {
		start := out.Len()
		out.WriteString(s)
		if pen.IsZero() {
			return
		}
		st := *pen
		st.Attrs &^= unsafeAttrs
		if st.IsZero() {
			return
		}
		if n := len(spans); n > 0 && spans[n-1].End == start && spans[n-1].Style.Equal(&st) {
			spans[n-1].End = out.Len()
			return
		}
		if len(spans) < maxSpans {
			spans = append(spans, Span{Start: start, End: out.Len(), Style: st})
		}
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == 0x1b || c == 0xc2 && i+1 < len(raw) && raw[i+1] == 0x9b {
			p.Reset()
			from := raw[i:]
			if c == 0xc2 {
				// CSI as the C1 character U+009B: read it as ESC [.
				from = append([]byte("\x1b["), raw[i+2:]...)
			}
			// Measured without the parser first: DecodeSequence indexes
			// past the parser's parameters on a sequence with more than
			// parser.MaxParamsSize of them (x/ansi v0.11.8), and any host
			// can print one. Only a colour with fewer is parsed.
			seq, _, n, _ := ansi.DecodeSequence(from, ansi.NormalState, nil)
			if n <= 0 {
				n = 1
			}
			csi := len(seq) >= 2 && seq[0] == 0x1b && seq[1] == '['
			if csi && seq[len(seq)-1] == 'm' && bytes.Count(seq, []byte{';'})+bytes.Count(seq, []byte{':'}) < parser.MaxParamsSize-1 {
				ansi.DecodeSequence(seq, ansi.NormalState, p)
			}
			if cmd := ansi.Cmd(p.Command()); csi && cmd.Final() == 'm' && cmd.Prefix() == 0 && cmd.Intermediate() == 0 {
				uv.ReadStyle(p.Params(), pen)
			}
			i += n
			continue
		}
		if c == '\r' {
			// What follows overwrites the line.
			out.Reset()
			spans, col = spans[:0], 0
			i++
			continue
		}
		if c >= 0x20 && c < 0x7f {
			j := i + 1
			for j < len(raw) && raw[j] >= 0x20 && raw[j] < 0x7f {
				j++
			}
			write(string(raw[i:j]))
			col += j - i
			i = j
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		i += size
		switch {
		case r == '\t':
			n := tabWidth - col%tabWidth
			write("        "[:n])
			col += n
		case r == utf8.RuneError && size == 1, r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
			write(string(utf8.RuneError))
			col++
		default:
			write(string(r))
			col++
		}
	}
	if len(spans) == 0 {
		spans = nil
	}
	return out.String(), spans
}

// groupDigits writes n with thousands separated: 12,345.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func pluralWord(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
