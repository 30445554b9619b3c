package devices

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// FormatError reports a devices.json that cannot be read, at a line and
// column (both 1-based; the column counts characters).
type FormatError struct {
	Path   string // empty when parsing bytes with no file behind them
	Line   int
	Column int
	Msg    string
}

func (e *FormatError) Error() string {
	where := "devices.json"
	if e.Path != "" {
		where = e.Path
	}
	return fmt.Sprintf("%s:%d:%d: %s; fix the file by hand (rex will not change it until it loads)", where, e.Line, e.Column, e.Msg)
}

// Parse decodes devices.json. Any document in the documented shape loads
// (after a UTF-8 byte-order mark, if there is one):
// "devices" maps names to objects with optional "host", "port", "ssh_key",
// "description", "roots", "become" and "become_user"; "groups" maps names to lists of device names; null
// stands for empty. Unknown fields at any level are kept verbatim. Empty
// (or all-whitespace) input is an empty registry. Entries are not
// validated here; see Device.Validate.
func Parse(data []byte) (*Registry, error) {
	r := New()
	// An editor that saves UTF-8 with a byte-order mark leaves an
	// invisible U+FEFF first, which JSON does not allow; skip it (a save
	// writes the file without one).
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	if len(bytes.TrimSpace(data)) == 0 {
		return r, nil
	}
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			rn, size := utf8.DecodeRune(data[off:])
			if rn == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, posError(data, off, "the file is not valid UTF-8")
	}
	// A full syntax check first gives the position of the first error.
	var probe json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			off := int(se.Offset) - 1 // Offset counts the offending byte
			if off < 0 {
				off = 0
			}
			if errors.Is(err, io.ErrUnexpectedEOF) || se.Error() == "unexpected end of JSON input" {
				off = len(data)
			}
			return nil, posError(data, off, se.Error())
		}
		return nil, posError(data, 0, err.Error())
	}
	p := parser{data: data}
	start := skipSpace(data, 0)
	err := p.object(start, "the file must be a JSON object such as {\"devices\": {}, \"groups\": {}}", func(key string, off int, raw []byte) error {
		switch key {
		case "devices":
			return p.devices(r, off, raw)
		case "groups":
			return p.groups(r, off, raw)
		default:
			r.extra[key] = json.RawMessage(bytes.Clone(raw))
			return nil
		}
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// parser walks a document already known to be valid JSON, keeping the
// absolute offset of every value so that shape errors carry a position.
type parser struct {
	data []byte
}

// object calls fn for each member of the object that starts at off, with
// the member value's offset and bytes. Duplicate keys are an error: the
// second would silently win, and a person editing the file would not know.
func (p *parser) object(off int, notObject string, fn func(key string, valOff int, raw []byte) error) error {
	if p.data[off] != '{' {
		return posError(p.data, off, notObject)
	}
	dec := json.NewDecoder(bytes.NewReader(p.data[off:]))
	if _, err := dec.Token(); err != nil { // '{'
		return posError(p.data, off, err.Error())
	}
	seen := map[string]bool{}
	for dec.More() {
		keyOff := off + skipSpaceComma(p.data[off:], int(dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return posError(p.data, keyOff, err.Error())
		}
		key, _ := tok.(string)
		if seen[key] {
			return posError(p.data, keyOff, fmt.Sprintf("%q appears twice in the same object; keep one", key))
		}
		seen[key] = true
		valOff := off + skipColon(p.data[off:], int(dec.InputOffset()))
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return posError(p.data, valOff, err.Error())
		}
		end := off + int(dec.InputOffset())
		if err := fn(key, valOff, p.data[valOff:end]); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil && !errors.Is(err, io.EOF) { // '}'
		return posError(p.data, off, err.Error())
	}
	return nil
}

func isNull(raw []byte) bool { return string(raw) == "null" }

func (p *parser) devices(r *Registry, off int, raw []byte) error {
	if isNull(raw) {
		return nil
	}
	return p.object(off, `"devices" must be an object that maps names to devices`, func(name string, off int, raw []byte) error {
		d := Device{Name: name}
		err := p.object(off, fmt.Sprintf("device %q must be an object such as {\"host\": \"user@host\"}", name), func(key string, off int, raw []byte) error {
			var err error
			switch key {
			case "host":
				err = decodeField(raw, &d.Host)
			case "port":
				err = decodeField(raw, &d.Port)
			case "ssh_key":
				err = decodeField(raw, &d.SSHKey)
			case "description":
				err = decodeField(raw, &d.Description)
			case "roots":
				err = decodeField(raw, &d.Roots)
			case "become":
				err = decodeField(raw, &d.Become)
			case "become_user":
				err = decodeField(raw, &d.BecomeUser)
			default:
				if d.extra == nil {
					d.extra = map[string]json.RawMessage{}
				}
				d.extra[key] = json.RawMessage(bytes.Clone(raw))
			}
			if err != nil {
				want := "a string"
				switch key {
				case "port":
					want = "a whole number"
				case "roots":
					want = `a list of paths such as ["/srv", "~/app"]`
				case "become":
					want = "true or false"
				}
				return posError(p.data, off, fmt.Sprintf("%q of device %q must be %s", key, name, want))
			}
			return nil
		})
		if err != nil {
			return err
		}
		r.devices[name] = d
		return nil
	})
}

func (p *parser) groups(r *Registry, off int, raw []byte) error {
	if isNull(raw) {
		return nil
	}
	return p.object(off, `"groups" must be an object that maps names to lists of devices`, func(name string, off int, raw []byte) error {
		var members []string
		if err := decodeField(raw, &members); err != nil {
			return posError(p.data, off, fmt.Sprintf("group %q must be a list of device names such as [\"web1\", \"web2\"]", name))
		}
		if members == nil {
			members = []string{}
		}
		r.groups[name] = members
		return nil
	})
}

// decodeField decodes one value; null leaves v at its zero value.
func decodeField(raw []byte, v any) error {
	if isNull(raw) {
		return nil
	}
	return json.Unmarshal(raw, v)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func skipSpaceComma(data []byte, i int) int {
	i = skipSpace(data, i)
	if i < len(data) && data[i] == ',' {
		i = skipSpace(data, i+1)
	}
	return i
}

func skipColon(data []byte, i int) int {
	i = skipSpace(data, i)
	if i < len(data) && data[i] == ':' {
		i = skipSpace(data, i+1)
	}
	return i
}

// posError builds a FormatError for the byte offset off.
func posError(data []byte, off int, msg string) *FormatError {
	if off > len(data) {
		off = len(data)
	}
	line, col := 1, 1
	lineStart := 0
	for i := 0; i < off; i++ {
		if data[i] == '\n' {
			line++
			lineStart = i + 1
		}
	}
	col += utf8.RuneCount(data[lineStart:off])
	return &FormatError{Line: line, Column: col, Msg: msg}
}
