package cas

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// ErrNotCanonical is returned (wrapped) when bytes are not the canonical JSON
// encoding of any value, or a value cannot be encoded canonically.
var ErrNotCanonical = errors.New("not canonical JSON")

// MaxCanonicalDepth bounds the nesting of arrays and objects.
const MaxCanonicalDepth = 64

// MarshalCanonical encodes v in rex's one canonical JSON form. The values it
// accepts, and the only ones UnmarshalCanonical produces, are:
//
//	nil, bool, string, int64 (int, int32, uint32 are widened),
//	[]any, map[string]any
//
// The form:
//   - no whitespace anywhere;
//   - object keys sorted by the bytes of their UTF-8 encoding (Go's string
//     order), each key once;
//   - integers only, in plain decimal: no sign on zero, no leading zeros, no
//     fraction or exponent; floats (and so NaN and ±Inf) are refused;
//   - strings must be valid UTF-8; the escapes are exactly \" \\ \b \f \n
//     \r \t, and \u00xx (lowercase hex) for the other bytes below 0x20;
//     every other character, including DEL (0x7f), '/', '<', '>', '&',
//     U+2028 and U+2029, is written as its raw UTF-8 bytes.
func MarshalCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encodeCanonical(&buf, v, 0); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeCanonical(buf *bytes.Buffer, v any, depth int) error {
	if depth > MaxCanonicalDepth {
		return fmt.Errorf("%w: nesting deeper than %d", ErrNotCanonical, MaxCanonicalDepth)
	}
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case int:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case int32:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case uint32:
		buf.WriteString(strconv.FormatInt(int64(x), 10))
	case float32, float64:
		return fmt.Errorf("%w: floating-point number %v; use an integer", ErrNotCanonical, x)
	case string:
		return encodeString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeCanonical(buf, e, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys) // Go compares strings bytewise: the documented order
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := encodeCanonical(buf, x[k], depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("%w: values of type %T cannot be encoded", ErrNotCanonical, v)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

func encodeString(buf *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: string %q is not valid UTF-8", ErrNotCanonical, clip(s))
	}
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		buf.WriteString(s[start:i])
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			buf.WriteString(`\u00`)
			buf.WriteByte(hexDigits[c>>4])
			buf.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
	return nil
}

// UnmarshalCanonical decodes data, which must be exactly the canonical
// encoding (see MarshalCanonical) of one value: any other spelling of the
// same value — whitespace, unsorted or repeated keys, other escapes, a
// fraction or exponent, "-0" — is refused, so a value has one digest.
func UnmarshalCanonical(data []byte) (any, error) {
	d := canonDecoder{data: data}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.pos != len(data) {
		return nil, d.errorf("unexpected data after the value")
	}
	return v, nil
}

type canonDecoder struct {
	data []byte
	pos  int
}

func (d *canonDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrNotCanonical, d.pos, fmt.Sprintf(format, args...))
}

func (d *canonDecoder) value(depth int) (any, error) {
	if depth > MaxCanonicalDepth {
		return nil, d.errorf("nesting deeper than %d", MaxCanonicalDepth)
	}
	if d.pos >= len(d.data) {
		return nil, d.errorf("unexpected end of data")
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		return d.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	default:
		return nil, d.errorf("unexpected character %q", c)
	}
}

func (d *canonDecoder) literal(word string) error {
	if !bytes.HasPrefix(d.data[d.pos:], []byte(word)) {
		return d.errorf("invalid literal")
	}
	d.pos += len(word)
	return nil
}

func (d *canonDecoder) object(depth int) (any, error) {
	d.pos++ // '{'
	m := map[string]any{}
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return m, nil
	}
	prev, first := "", true
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, d.errorf("expected a string key")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if !first && k <= prev {
			if k == prev {
				return nil, d.errorf("key %q repeated", clip(k))
			}
			return nil, d.errorf("key %q is out of order", clip(k))
		}
		prev, first = k, false
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, d.errorf("expected ':'")
		}
		d.pos++
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m[k] = v
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end of data in object")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, nil
		default:
			return nil, d.errorf("expected ',' or '}'")
		}
	}
}

func (d *canonDecoder) array(depth int) (any, error) {
	d.pos++ // '['
	a := []any{}
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return a, nil
	}
	for {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		if d.pos >= len(d.data) {
			return nil, d.errorf("unexpected end of data in array")
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, nil
		default:
			return nil, d.errorf("expected ',' or ']'")
		}
	}
}

func (d *canonDecoder) number() (any, error) {
	start := d.pos
	if d.data[d.pos] == '-' {
		d.pos++
	}
	digits := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	if d.pos < len(d.data) {
		switch d.data[d.pos] {
		case '.', 'e', 'E':
			return nil, d.errorf("floating-point numbers are not allowed; objects hold integers only")
		}
	}
	text := string(d.data[start:d.pos])
	switch {
	case d.pos == digits:
		return nil, d.errorf("'-' without digits")
	case d.data[digits] == '0' && d.pos-digits > 1:
		return nil, d.errorf("number %s has a leading zero", text)
	case text == "-0":
		return nil, d.errorf("-0 is written 0")
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return nil, d.errorf("integer %s does not fit in 64 bits", clip(text))
	}
	return n, nil
}

func (d *canonDecoder) str() (string, error) {
	d.pos++ // opening quote
	var out []byte
	start := d.pos
	for {
		if d.pos >= len(d.data) {
			return "", d.errorf("unterminated string")
		}
		c := d.data[d.pos]
		switch {
		case c == '"':
			out = append(out, d.data[start:d.pos]...)
			d.pos++
			if !utf8.Valid(out) {
				return "", d.errorf("string is not valid UTF-8")
			}
			return string(out), nil
		case c < 0x20:
			return "", d.errorf("raw control character 0x%02x in string; it must be escaped", c)
		case c == '\\':
			out = append(out, d.data[start:d.pos]...)
			if d.pos+1 >= len(d.data) {
				return "", d.errorf("unterminated escape")
			}
			e := d.data[d.pos+1]
			d.pos += 2
			switch e {
			case '"':
				out = append(out, '"')
			case '\\':
				out = append(out, '\\')
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
				b, err := d.controlEscape()
				if err != nil {
					return "", err
				}
				out = append(out, b)
			default:
				return "", d.errorf("escape \\%c is not canonical", e)
			}
			start = d.pos
		default:
			d.pos++
		}
	}
}

// controlEscape reads the XXXX of \uXXXX, which canonically appears only for
// control characters without a short escape, in lowercase hex.
func (d *canonDecoder) controlEscape() (byte, error) {
	if d.pos+4 > len(d.data) {
		return 0, d.errorf("truncated \\u escape")
	}
	h := d.data[d.pos : d.pos+4]
	if h[0] != '0' || h[1] != '0' || !isLowerHex(h[2]) || !isLowerHex(h[3]) {
		return 0, d.errorf("\\u%s is not canonical; only control characters are written as \\u00xx", h)
	}
	b := unhex(h[2])<<4 | unhex(h[3])
	switch b {
	case '\b', '\f', '\n', '\r', '\t':
		return 0, d.errorf("\\u%s is not canonical; use the short escape", h)
	}
	if b >= 0x20 {
		return 0, d.errorf("\\u%s is not canonical; write the character itself", h)
	}
	d.pos += 4
	return b, nil
}

func isLowerHex(c byte) bool { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// Helpers to read decoded objects strictly.

type fields map[string]any

func asFields(v any, what string) (fields, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not an object", ErrNotCanonical, what)
	}
	return fields(m), nil
}

// only refuses keys outside allowed, so an object has one meaning.
func (f fields) only(what string, allowed ...string) error {
	for k := range f {
		if !slices.Contains(allowed, k) {
			return fmt.Errorf("%w: %s has unknown field %q", ErrNotCanonical, what, clip(k))
		}
	}
	return nil
}

func (f fields) str(what, key string) (string, error) {
	s, ok := f[key].(string)
	if !ok {
		return "", fmt.Errorf("%w: %s needs string field %q", ErrNotCanonical, what, key)
	}
	return s, nil
}

func (f fields) integer(what, key string) (int64, error) {
	n, ok := f[key].(int64)
	if !ok {
		return 0, fmt.Errorf("%w: %s needs integer field %q", ErrNotCanonical, what, key)
	}
	return n, nil
}

func (f fields) boolean(what, key string) (bool, error) {
	b, ok := f[key].(bool)
	if !ok {
		return false, fmt.Errorf("%w: %s needs boolean field %q", ErrNotCanonical, what, key)
	}
	return b, nil
}

func (f fields) list(what, key string) ([]any, error) {
	a, ok := f[key].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: %s needs array field %q", ErrNotCanonical, what, key)
	}
	return a, nil
}

func (f fields) digest(what, key string) (Digest, error) {
	return digestValue(f[key], what+" field "+key)
}

// Digests inside objects are {"hash": "...", "size": N}.

func digestJSON(d Digest) map[string]any {
	return map[string]any{"hash": d.Hash, "size": d.Size}
}

func digestValue(v any, what string) (Digest, error) {
	f, err := asFields(v, what)
	if err != nil {
		return Digest{}, err
	}
	if err := f.only(what, "hash", "size"); err != nil {
		return Digest{}, err
	}
	h, err := f.str(what, "hash")
	if err != nil {
		return Digest{}, err
	}
	n, err := f.integer(what, "size")
	if err != nil {
		return Digest{}, err
	}
	d := Digest{Hash: h, Size: n}
	if err := d.Validate(); err != nil {
		return Digest{}, fmt.Errorf("%s: %w", what, err)
	}
	return d, nil
}
