package cas

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrInvalidTree is returned (wrapped) for a tree that breaks a rule:
// bad or duplicate names, unsorted entries, bad symlink targets.
var ErrInvalidTree = errors.New("invalid tree")

// EntryType is the kind of a tree entry.
type EntryType string

// The entry types.
const (
	EntryFile    EntryType = "file"
	EntryDir     EntryType = "dir"
	EntrySymlink EntryType = "symlink"
)

// Limits on names and symlink targets (those of common Unix file systems).
const (
	MaxNameLen   = 255
	MaxTargetLen = 4095
)

// Entry is one name in a directory.
type Entry struct {
	Name       string
	Type       EntryType
	Digest     Digest // file: its content; dir: its tree; zero for a symlink
	Executable bool   // files only; the owner's execute bit, as git records it
	Target     string // symlinks only
	// Mode is the permission bits of a file or directory (at most 0o7777),
	// or 0 for the default one (see Perm). A file's Mode, when set, agrees
	// with Executable.
	Mode fs.FileMode
}

// PermMask is the part of a mode a tree records: permissions, setuid,
// setgid and sticky (in Unix's octal layout, as chmod takes it).
const PermMask fs.FileMode = 0o7777

// DefaultPerm is the mode an entry without one has: 0755 for directories
// and executable files, 0644 for other files.
func DefaultPerm(t EntryType, executable bool) fs.FileMode {
	if t == EntryDir || executable {
		return 0o755
	}
	return 0o644
}

// Perm returns the entry's permission bits in Unix's octal layout (0o4000
// setuid, 0o2000 setgid, 0o1000 sticky): its Mode, or the default.
func (e Entry) Perm() fs.FileMode {
	if e.Mode != 0 {
		return e.Mode
	}
	return DefaultPerm(e.Type, e.Executable)
}

// WithPerm returns e with permission bits p (setting Executable from the
// owner's execute bit for a file), in the canonical form: a default mode
// is recorded as none.
func (e Entry) WithPerm(p fs.FileMode) Entry {
	p &= PermMask
	if e.Type == EntryFile {
		e.Executable = p&0o100 != 0
	}
	e.Mode = p
	if p == DefaultPerm(e.Type, e.Executable) {
		e.Mode = 0
	}
	return e
}

// Same reports whether two entries describe the same thing (name aside).
func (e Entry) Same(o Entry) bool {
	if e.Type != o.Type || e.Digest != o.Digest || e.Target != o.Target {
		return false
	}
	return e.Type == EntrySymlink || e.Perm() == o.Perm()
}

// Tree is one directory: its entries sorted by the bytes of their names.
type Tree struct {
	Entries []Entry
}

// Lookup finds the entry called name.
func (t Tree) Lookup(name string) (Entry, bool) {
	i, ok := slices.BinarySearchFunc(t.Entries, name, func(e Entry, n string) int { return strings.Compare(e.Name, n) })
	if !ok {
		return Entry{}, false
	}
	return t.Entries[i], true
}

// ValidateName accepts a single path component: not empty, not "." or "..",
// no '/' or NUL, valid UTF-8, at most MaxNameLen bytes.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidTree)
	case name == "." || name == "..":
		return fmt.Errorf("%w: name %q is not allowed", ErrInvalidTree, name)
	case strings.ContainsRune(name, '/'):
		return fmt.Errorf("%w: name %q contains '/'", ErrInvalidTree, clip(name))
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%w: name %q contains NUL", ErrInvalidTree, clip(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name %q is not valid UTF-8", ErrInvalidTree, clip(name))
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: name %q is longer than %d bytes", ErrInvalidTree, clip(name), MaxNameLen)
	}
	return nil
}

// ValidateSymlinkTarget checks a symlink target on its own: relative, not
// empty, no NUL, valid UTF-8, at most MaxTargetLen bytes, and ".." only as
// leading components ("../../x" is fine, "x/../y" is not: a ".." after a
// name could climb out of a directory reached through another symlink).
// It returns how many levels the target climbs; the link may sit no
// shallower than that (see ValidateSymlinkAt).
func ValidateSymlinkTarget(target string) (up int, err error) {
	switch {
	case target == "":
		return 0, fmt.Errorf("%w: empty symlink target", ErrInvalidTree)
	case strings.HasPrefix(target, "/"):
		return 0, fmt.Errorf("%w: symlink target %q is absolute; only relative targets inside the tree are allowed", ErrInvalidTree, clip(target))
	case strings.ContainsRune(target, 0):
		return 0, fmt.Errorf("%w: symlink target %q contains NUL", ErrInvalidTree, clip(target))
	case !utf8.ValidString(target):
		return 0, fmt.Errorf("%w: symlink target %q is not valid UTF-8", ErrInvalidTree, clip(target))
	case len(target) > MaxTargetLen:
		return 0, fmt.Errorf("%w: symlink target %q is longer than %d bytes", ErrInvalidTree, clip(target), MaxTargetLen)
	}
	named := false
	for part := range strings.SplitSeq(target, "/") {
		switch part {
		case "", ".":
		case "..":
			if named {
				return 0, fmt.Errorf("%w: symlink target %q has \"..\" after a name; write it without", ErrInvalidTree, clip(target))
			}
			up++
		default:
			named = true
		}
	}
	return up, nil
}

// ValidateSymlinkAt checks a symlink whose directory is depth levels below
// the tree's root (0 for the root itself): its target must stay inside.
func ValidateSymlinkAt(target string, depth int) error {
	up, err := ValidateSymlinkTarget(target)
	if err != nil {
		return err
	}
	if up > depth {
		return fmt.Errorf("%w: symlink target %q climbs %d levels from a directory %d deep and would escape the tree", ErrInvalidTree, clip(target), up, depth)
	}
	return nil
}

// validate checks the entries' names, order and fields.
func (t Tree) validate() error {
	for i, e := range t.Entries {
		if err := ValidateName(e.Name); err != nil {
			return err
		}
		if i > 0 {
			switch prev := t.Entries[i-1].Name; {
			case prev == e.Name:
				return fmt.Errorf("%w: name %q appears twice", ErrInvalidTree, clip(e.Name))
			case prev > e.Name:
				return fmt.Errorf("%w: entry %q comes after %q; entries are sorted by name bytes", ErrInvalidTree, clip(e.Name), clip(prev))
			}
		}
		switch e.Type {
		case EntryFile, EntryDir:
			if err := e.Digest.Validate(); err != nil {
				return fmt.Errorf("%w: entry %q: %w", ErrInvalidTree, clip(e.Name), err)
			}
			if e.Target != "" || (e.Type == EntryDir && e.Executable) {
				return fmt.Errorf("%w: %s entry %q has fields of another type", ErrInvalidTree, e.Type, clip(e.Name))
			}
			if e.Mode&^PermMask != 0 {
				return fmt.Errorf("%w: entry %q has mode %#o, beyond %#o", ErrInvalidTree, clip(e.Name), uint32(e.Mode), uint32(PermMask))
			}
			if e.Type == EntryFile && e.Mode != 0 && (e.Mode&0o100 != 0) != e.Executable {
				return fmt.Errorf("%w: file entry %q has mode %#o but exec %v", ErrInvalidTree, clip(e.Name), uint32(e.Mode), e.Executable)
			}
		case EntrySymlink:
			if _, err := ValidateSymlinkTarget(e.Target); err != nil {
				return fmt.Errorf("entry %q: %w", clip(e.Name), err)
			}
			if !e.Digest.IsZero() || e.Executable || e.Mode != 0 {
				return fmt.Errorf("%w: symlink entry %q has fields of another type", ErrInvalidTree, clip(e.Name))
			}
		default:
			return fmt.Errorf("%w: entry %q has unknown type %q", ErrInvalidTree, clip(e.Name), clip(string(e.Type)))
		}
	}
	return nil
}

// Encode returns the tree's canonical bytes:
//
//	{"entries":[E,...],"kind":"tree"}
//	file:    {"digest":{"hash":H,"size":N},"exec":B,"mode":M,"name":S,"type":"file"}
//	dir:     {"digest":{"hash":H,"size":N},"mode":M,"name":S,"type":"dir"}
//	symlink: {"name":S,"target":S,"type":"symlink"}
//
// "mode" (the permission bits as an integer) appears only when it is not
// the default (see DefaultPerm), so trees of default modes keep the digests
// they had before modes were recorded.
func (t Tree) Encode() ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	// appendTree writes the canonical form without building maps; only a
	// string that is not valid UTF-8 makes it give up, and
	// MarshalCanonical says why.
	if data, ok := appendTree(nil, t); ok {
		return data, nil
	}
	return encodeTreeGeneric(t)
}

// encodeTreeGeneric is Encode through MarshalCanonical.
func encodeTreeGeneric(t Tree) ([]byte, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	entries := make([]any, len(t.Entries))
	for i, e := range t.Entries {
		m := map[string]any{"name": e.Name, "type": string(e.Type)}
		switch e.Type {
		case EntryFile:
			m["digest"] = digestJSON(e.Digest)
			m["exec"] = e.Executable
		case EntryDir:
			m["digest"] = digestJSON(e.Digest)
		}
		if e.Type != EntrySymlink {
			if p := e.Perm(); p != DefaultPerm(e.Type, e.Executable) {
				m["mode"] = int64(p)
			}
		}
		switch e.Type {
		case EntrySymlink:
			m["target"] = e.Target
		}
		entries[i] = m
	}
	return MarshalCanonical(map[string]any{"kind": "tree", "entries": entries})
}

// DecodeTree parses canonical tree bytes and applies every rule Encode does.
func DecodeTree(data []byte) (Tree, error) {
	if t, ok := decodeTreeFast(data); ok {
		return t, nil
	}
	return decodeTreeSlow(data)
}

// decodeTreeSlow is DecodeTree through the generic canonical decoder.
func decodeTreeSlow(data []byte) (Tree, error) {
	v, err := UnmarshalCanonical(data)
	if err != nil {
		return Tree{}, fmt.Errorf("decode tree: %w", err)
	}
	f, err := asFields(v, "tree")
	if err != nil {
		return Tree{}, fmt.Errorf("decode tree: %w", err)
	}
	if err := f.only("tree", "entries", "kind"); err != nil {
		return Tree{}, fmt.Errorf("decode tree: %w", err)
	}
	if k, err := f.str("tree", "kind"); err != nil || k != "tree" {
		return Tree{}, fmt.Errorf("decode tree: %w: kind is not \"tree\"", ErrInvalidTree)
	}
	list, err := f.list("tree", "entries")
	if err != nil {
		return Tree{}, fmt.Errorf("decode tree: %w", err)
	}
	t := Tree{Entries: make([]Entry, 0, len(list))}
	for i, item := range list {
		e, err := decodeEntry(item)
		if err != nil {
			return Tree{}, fmt.Errorf("decode tree: entry %d: %w", i, err)
		}
		t.Entries = append(t.Entries, e)
	}
	if err := t.validate(); err != nil {
		return Tree{}, fmt.Errorf("decode tree: %w", err)
	}
	return t, nil
}

func decodeEntry(v any) (Entry, error) {
	const what = "tree entry"
	f, err := asFields(v, what)
	if err != nil {
		return Entry{}, err
	}
	var e Entry
	if e.Name, err = f.str(what, "name"); err != nil {
		return Entry{}, err
	}
	typ, err := f.str(what, "type")
	if err != nil {
		return Entry{}, err
	}
	e.Type = EntryType(typ)
	switch e.Type {
	case EntryFile:
		if err := f.only(what, "digest", "exec", "mode", "name", "type"); err != nil {
			return Entry{}, err
		}
		if e.Executable, err = f.boolean(what, "exec"); err != nil {
			return Entry{}, err
		}
		if e.Digest, err = f.digest(what, "digest"); err != nil {
			return Entry{}, err
		}
		if e.Mode, err = decodeMode(f, e); err != nil {
			return Entry{}, err
		}
	case EntryDir:
		if err := f.only(what, "digest", "mode", "name", "type"); err != nil {
			return Entry{}, err
		}
		if e.Digest, err = f.digest(what, "digest"); err != nil {
			return Entry{}, err
		}
		if e.Mode, err = decodeMode(f, e); err != nil {
			return Entry{}, err
		}
	case EntrySymlink:
		if err := f.only(what, "name", "target", "type"); err != nil {
			return Entry{}, err
		}
		if e.Target, err = f.str(what, "target"); err != nil {
			return Entry{}, err
		}
	default:
		return Entry{}, fmt.Errorf("%w: unknown entry type %q", ErrInvalidTree, clip(typ))
	}
	return e, nil
}

// decodeMode reads an entry's optional "mode": present only when it is
// not the default, within PermMask.
func decodeMode(f fields, e Entry) (fs.FileMode, error) {
	if _, ok := f["mode"]; !ok {
		return 0, nil
	}
	n, err := f.integer("tree entry", "mode")
	if err != nil {
		return 0, err
	}
	if n < 0 || n > int64(PermMask) {
		return 0, fmt.Errorf("%w: entry %q has mode %d, beyond %#o", ErrInvalidTree, clip(e.Name), n, uint32(PermMask))
	}
	if fs.FileMode(n) == DefaultPerm(e.Type, e.Executable) {
		return 0, fmt.Errorf("%w: entry %q spells out its default mode %#o; leave it out", ErrNotCanonical, clip(e.Name), n)
	}
	return fs.FileMode(n), nil
}

// PutTree encodes and stores t. Its children should already be stored (see
// the package invariant).
func (s *Store) PutTree(t Tree) (Digest, error) {
	data, err := t.Encode()
	if err != nil {
		return Digest{}, err
	}
	return s.Add(data)
}

// ReadTree reads, verifies and decodes the tree d.
func (s *Store) ReadTree(d Digest) (Tree, error) {
	data, err := s.Read(d)
	if err != nil {
		return Tree{}, err
	}
	t, err := DecodeTree(data)
	if err != nil {
		return Tree{}, fmt.Errorf("tree %s: %w", d, err)
	}
	return t, nil
}

// EmptyTree returns the digest of the tree with no entries, the base to use
// when two trees have no common ancestor.
func EmptyTree() Digest {
	data, _ := Tree{}.Encode() // cannot fail: nothing to validate
	return DigestOf(data)
}
