package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Output events are most of the bytes on the wire, so they have a fast path:
// AppendOutputEvent writes them without reflection, and ParseOutputEvent
// reads exactly that layout back. Anything else on the wire goes through
// encoding/json; the fast parser says so by returning ok == false, never by
// guessing.

// AppendOutputEvent appends the NDJSON line of an output event (method is
// exec.stdout, exec.stderr or pty.output), newline included. data is the
// raw payload; it is sent as utf8 when that is valid and no longer than
// base64, else as base64 (see asText).
func AppendOutputEvent(dst []byte, method string, ev *OutputEvent, data []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = appendString(dst, method)
	dst = append(dst, `,"params":{`...)
	dst = appendEventIDs(dst, ev)
	dst = append(dst, `,"data":"`...)
	enc := EncodingUTF8
	// Escaping may add at most what base64 would (see asText); past
	// that, or at invalid UTF-8, the chunk goes as base64 instead.
	var text bool
	mark := len(dst)
	if dst, text = appendText(dst, data, base64.StdEncoding.EncodedLen(len(data))-len(data)); !text {
		enc = EncodingBase64
		dst = dst[:mark]
		n := base64.StdEncoding.EncodedLen(len(data))
		dst = slices.Grow(dst, n)[:len(dst)+n]
		base64.StdEncoding.Encode(dst[len(dst)-n:], data)
	}
	dst = append(dst, `","encoding":"`...)
	dst = append(dst, enc...)
	dst = append(dst, "\"}}\n"...)
	return dst
}

// appendEventIDs appends the params that name an output event, from
// session_id to the optional session_seq, as both layouts carry them
// (AppendOutputEvent, AppendRawOutputLine).
func appendEventIDs(dst []byte, ev *OutputEvent) []byte {
	dst = append(dst, `"session_id":`...)
	dst = appendString(dst, ev.SessionID)
	dst = append(dst, `,"process_id":`...)
	dst = appendString(dst, ev.ProcessID)
	if ev.PTYID != "" {
		dst = append(dst, `,"pty_id":`...)
		dst = appendString(dst, ev.PTYID)
	}
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, ev.Seq, 10)
	if ev.SessionSeq != 0 {
		dst = append(dst, `,"session_seq":`...)
		dst = strconv.AppendUint(dst, ev.SessionSeq, 10)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD") // as encoding/json does
	}
	dst = append(dst, '"')
	dst = appendEscaped(dst, []byte(s))
	return append(dst, '"')
}

const hexDigits = "0123456789abcdef"

// asText reports whether b travels as a utf8 JSON string: it must be valid
// UTF-8, and escaped no longer than base64 would make it. Text with the
// odd tab or quote stays readable; output full of control bytes (a stream
// of NULs from /dev/zero is 6 bytes on the wire per byte as \u0000) goes
// as base64's 4/3 instead.
func asText(b []byte) bool {
	budget := base64.StdEncoding.EncodedLen(len(b)) - len(b) // extra bytes escaping may add
	i := 0
	for {
		i = nextSpecial(b, i)
		if i == len(b) {
			return true
		}
		switch c := b[i]; c {
		case '"', '\\', '\n', '\r', '\t':
			budget--
		default:
			if c >= utf8.RuneSelf {
				r, size := utf8.DecodeRune(b[i:])
				if r == utf8.RuneError && size == 1 {
					return false
				}
				i += size
				continue
			}
			budget -= 5 // \u00XX
		}
		if budget < 0 {
			return false
		}
		i++
	}
}

// Output is scanned a word at a time: 8 bytes are checked at once for
// anything that is not plain printable ASCII, which is almost all of what
// commands print.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// specialBytes has the high bit set in the lowest byte of w (little
// endian) that is a control byte, a quote, a backslash or not ASCII. Bits
// above the lowest may be set spuriously (a borrow), never the lowest one.
func specialBytes(w uint64) uint64 {
	ctl := w - lsb*0x20
	quote := (w ^ lsb*'"') - lsb
	backslash := (w ^ lsb*'\\') - lsb
	return (ctl | quote | backslash | w) & msb
}

// nextSpecial returns the index of the first byte of b at or after i that
// JSON must escape or that is not ASCII, or len(b).
func nextSpecial(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := specialBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// appendText appends b escaped for the body of a JSON string when b is
// valid UTF-8 and escaping adds at most extra bytes; otherwise it returns
// false (and dst with an unspecified tail, for the caller to cut). One
// pass: the check and the copy are the same scan.
func appendText(dst, b []byte, extra int) ([]byte, bool) {
	start, i := 0, 0
	for {
		i = nextSpecial(b, i)
		if i == len(b) {
			return append(dst, b[start:]...), true
		}
		c := b[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return dst, false
			}
			i += size
			continue
		}
		dst = append(dst, b[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			extra -= 4
		}
		if extra--; extra < 0 {
			return dst, false
		}
		i++
		start = i
	}
}

// appendEscaped escapes valid UTF-8 for a JSON string: quote, backslash and
// control characters; everything else is copied in runs.
func appendEscaped(dst, s []byte) []byte {
	dst, _ = appendText(dst, s, math.MaxInt)
	return dst
}

// ParseOutputEvent reads a line written by AppendOutputEvent. It returns
// the method, the event (Data left empty) and the decoded payload, or
// ok == false when the line has any other shape.
func ParseOutputEvent(line []byte) (method string, ev OutputEvent, data []byte, ok bool) {
	p := fastParser{b: line}
	if !p.lit(`{"jsonrpc":"2.0","method":`) {
		return
	}
	m, ok1 := p.str()
	if !ok1 || (m != EventExecStdout && m != EventExecStderr && m != EventPTYOutput) {
		return
	}
	if !p.lit(`,"params":{`) || !p.eventIDs(&ev) || !p.lit(`,"data":"`) {
		return
	}
	raw, ok1 := p.until('"')
	if !ok1 || !p.lit(`,"encoding":"`) {
		return
	}
	enc, ok1 := p.until('"')
	if !ok1 || !p.lit(`}}`) || !p.end() {
		return
	}
	switch string(enc) {
	case EncodingUTF8:
		d, ok2 := unescape(raw)
		if !ok2 {
			return
		}
		data = d
	case EncodingBase64:
		d := make([]byte, base64.StdEncoding.DecodedLen(len(raw)))
		n, err := base64.StdEncoding.Strict().Decode(d, raw)
		if err != nil || bytes.ContainsAny(raw, "\r\n") {
			return
		}
		data = d[:n]
	default:
		return
	}
	ev.Encoding = string(enc)
	return m, ev, data, true
}

type fastParser struct {
	b []byte
	i int
}

// eventIDs reads what appendEventIDs writes into ev.
func (p *fastParser) eventIDs(ev *OutputEvent) bool {
	var ok bool
	if !p.lit(`"session_id":`) {
		return false
	}
	if ev.SessionID, ok = p.str(); !ok || !p.lit(`,"process_id":`) {
		return false
	}
	if ev.ProcessID, ok = p.str(); !ok {
		return false
	}
	if p.lit(`,"pty_id":`) {
		if ev.PTYID, ok = p.str(); !ok {
			return false
		}
	}
	if !p.lit(`,"seq":`) {
		return false
	}
	if ev.Seq, ok = p.uint(); !ok {
		return false
	}
	if p.lit(`,"session_seq":`) {
		if ev.SessionSeq, ok = p.uint(); !ok {
			return false
		}
	}
	return true
}

func (p *fastParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *fastParser) end() bool {
	rest := bytes.TrimRight(p.b[p.i:], " \t\r\n")
	return len(rest) == 0
}

// until returns the raw bytes up to the next unescaped c (a string's end)
// and moves past it.
func (p *fastParser) until(c byte) ([]byte, bool) {
	start := p.i
	for {
		j := bytes.IndexByte(p.b[p.i:], c)
		if j < 0 {
			return nil, false
		}
		k := p.i + j
		n := 0 // backslashes right before it: an odd count escapes it
		for m := k - 1; m >= start && p.b[m] == '\\'; m-- {
			n++
		}
		p.i = k + 1
		if n%2 == 0 {
			return p.b[start:k], true
		}
	}
}

// str reads a JSON string with no escapes (ids are plain).
func (p *fastParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	raw, ok := p.until('"')
	if !ok || !utf8.Valid(raw) {
		return "", false
	}
	for _, c := range raw {
		if c < 0x20 || c == '\\' {
			return "", false
		}
	}
	return string(raw), true
}

func (p *fastParser) uint() (uint64, bool) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == start || p.i-start > 19 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.b[start:p.i]), 10, 64)
	return v, err == nil
}

// unescape decodes the body of a JSON string. It refuses raw control
// characters and invalid UTF-8, as a JSON decoder would.
func unescape(raw []byte) ([]byte, bool) {
	return appendUnescaped(make([]byte, 0, len(raw)), raw)
}

// appendUnescaped appends the decoded body of a JSON string to out. Runs
// between escapes are checked a word at a time; only a run with non-ASCII
// bytes is checked for UTF-8 (an escape always decodes to valid UTF-8, and
// a backslash never splits a character, so valid runs make valid output).
func appendUnescaped(out, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\\')
		if j < 0 {
			j = len(raw) - i
		}
		run := raw[i : i+j]
		if !plainRun(run) {
			return nil, false
		}
		out = append(out, run...)
		i += j
		if i >= len(raw) {
			break
		}
		i++ // the backslash
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case '"', '\\', '/':
			out = append(out, raw[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok {
				return nil, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if r2, ok := hex4(raw[i+3:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 7
							continue
						}
					}
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
		i++
	}
	return out, true
}

// plainRun reports whether run (a stretch of a JSON string between
// escapes) may stand in a string as is: no control bytes, valid UTF-8.
func plainRun(run []byte) bool {
	var ctl, high uint64
	i := 0
	for ; i+8 <= len(run); i += 8 {
		w := binary.LittleEndian.Uint64(run[i:])
		ctl |= (w - lsb*0x20) &^ w // exact for "any byte below 0x20"
		high |= w
	}
	for ; i < len(run); i++ {
		c := uint64(run[i])
		ctl |= (c - 0x20) &^ c & 0x80
		high |= c
	}
	if ctl&msb != 0 {
		return false
	}
	return high&msb == 0 || utf8.Valid(run)
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
