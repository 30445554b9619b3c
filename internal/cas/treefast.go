package cas

import (
	"bytes"
	"io/fs"
	"strconv"
	"unicode/utf8"
)

// Trees are decoded on every push (a target plans from them; 101 trees of
// 100 entries took ~60 ms per host through the generic canonical decoder),
// so DecodeTree first tries decodeTreeFast: it reads the one layout Encode
// writes without building maps, then writes the tree again with
// appendTree and takes it only if that gives the very same bytes. Anything
// else (an escape in a name, a tree Encode would not write) goes through
// the generic decoder, which gives the precise error.

// decodeTreeFast reads data in the layout appendTree writes; ok is false
// for anything else.
func decodeTreeFast(data []byte) (t Tree, ok bool) {
	p := treeParser{b: data}
	if !p.lit(`{"entries":[`) {
		return Tree{}, false
	}
	t.Entries = make([]Entry, 0, bytes.Count(data, []byte(`"name":`))) // as the generic decoder: never nil
	for first := true; !p.lit(`],"kind":"tree"}`); first = false {
		if !first && !p.lit(`,`) {
			return Tree{}, false
		}
		e, ok := p.entry()
		if !ok {
			return Tree{}, false
		}
		t.Entries = append(t.Entries, e)
	}
	if p.i != len(p.b) || t.validate() != nil {
		return Tree{}, false
	}
	// Only the bytes Encode would write for this tree are the tree.
	if enc, ok := appendTree(make([]byte, 0, len(data)), t); !ok || !bytes.Equal(enc, data) {
		return Tree{}, false
	}
	return t, true
}

func (p *treeParser) entry() (e Entry, ok bool) {
	if !p.lit(`{`) {
		return e, false
	}
	if p.lit(`"digest":{"hash":`) {
		if e.Digest.Hash, ok = p.str(); !ok || !p.lit(`,"size":`) {
			return e, false
		}
		n, ok := p.int()
		if !ok || !p.lit(`},`) {
			return e, false
		}
		e.Digest.Size = n
	}
	if p.lit(`"exec":`) {
		switch {
		case p.lit(`true,`):
			e.Executable = true
		case p.lit(`false,`):
		default:
			return e, false
		}
	}
	if p.lit(`"mode":`) {
		n, ok := p.int()
		if !ok || n < 0 || n > int64(PermMask) || !p.lit(`,`) {
			return e, false
		}
		e.Mode = fs.FileMode(n)
	}
	if !p.lit(`"name":`) {
		return e, false
	}
	if e.Name, ok = p.str(); !ok {
		return e, false
	}
	if p.lit(`,"target":`) {
		if e.Target, ok = p.str(); !ok {
			return e, false
		}
	}
	if !p.lit(`,"type":`) {
		return e, false
	}
	typ, ok := p.str()
	if !ok || !p.lit(`}`) {
		return e, false
	}
	e.Type = EntryType(typ)
	return e, true
}

type treeParser struct {
	b []byte
	i int
}

func (p *treeParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// str reads a string with no escapes (the rare name with one takes the
// generic decoder).
func (p *treeParser) str() (string, bool) {
	if !p.lit(`"`) {
		return "", false
	}
	j := bytes.IndexByte(p.b[p.i:], '"')
	if j < 0 {
		return "", false
	}
	raw := p.b[p.i : p.i+j]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return "", false
	}
	p.i += j + 1
	return string(raw), true
}

func (p *treeParser) int() (int64, bool) {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == start || p.i-start > 18 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

// appendTree appends the canonical encoding of t, as Encode writes it
// (keys in byte order, no spaces), without building maps. ok is false when
// a string is not valid UTF-8 (Encode refuses those). t must be valid.
func appendTree(dst []byte, t Tree) ([]byte, bool) {
	dst = append(dst, `{"entries":[`...)
	for i, e := range t.Entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if e.Type == EntryFile || e.Type == EntryDir {
			dst = append(dst, `"digest":{"hash":`...)
			dst = appendCanonString(dst, e.Digest.Hash)
			dst = append(dst, `,"size":`...)
			dst = strconv.AppendInt(dst, e.Digest.Size, 10)
			dst = append(dst, "},"...)
		}
		if e.Type == EntryFile {
			dst = append(dst, `"exec":`...)
			dst = strconv.AppendBool(dst, e.Executable)
			dst = append(dst, ',')
		}
		if e.Type != EntrySymlink {
			if p := e.Perm(); p != DefaultPerm(e.Type, e.Executable) {
				dst = append(dst, `"mode":`...)
				dst = strconv.AppendInt(dst, int64(p), 10)
				dst = append(dst, ',')
			}
		}
		dst = append(dst, `"name":`...)
		dst = appendCanonString(dst, e.Name)
		if e.Type == EntrySymlink {
			dst = append(dst, `,"target":`...)
			dst = appendCanonString(dst, e.Target)
		}
		dst = append(dst, `,"type":`...)
		dst = appendCanonString(dst, string(e.Type))
		dst = append(dst, '}')
		if !utf8.ValidString(e.Name) || !utf8.ValidString(e.Target) || !utf8.ValidString(e.Digest.Hash) || !utf8.ValidString(string(e.Type)) {
			return nil, false
		}
	}
	return append(dst, `],"kind":"tree"}`...), true
}

// appendCanonString is encodeString's escaping, appended to dst.
func appendCanonString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
