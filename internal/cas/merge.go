package cas

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxTextMergeSize is the default size limit for a line-based merge: a file
// larger than this on any side is not merged as text.
const MaxTextMergeSize = 1 << 20

// ConflictKind says why a path could not be merged.
type ConflictKind string

// The conflict kinds.
const (
	// One side modified the entry, the other deleted it. The merged tree
	// keeps the modified entry.
	ConflictModifyDelete ConflictKind = "modify/delete"
	// Both sides added the entry with different content. Text files get
	// conflict markers (Markers); otherwise ours is kept.
	ConflictAddAdd ConflictKind = "add/add"
	// One side has a directory where the other has a file or symlink. The
	// merged tree keeps ours.
	ConflictFileDirectory ConflictKind = "file/directory"
	// Both sides changed a text file in overlapping or touching places. The
	// merged file holds git-style conflict markers (Markers).
	ConflictContent ConflictKind = "content"
	// Both sides changed a file that cannot be merged as text (not UTF-8,
	// contains NUL, or larger than the limit). The merged tree keeps ours.
	ConflictBinary ConflictKind = "binary"
	// Both sides changed a symlink differently, or one made it a file. The
	// merged tree keeps ours.
	ConflictSymlink ConflictKind = "symlink"
)

// Conflict is one path the merge could not settle.
type Conflict struct {
	Path    string // slash-separated, relative to the tree root
	Kind    ConflictKind
	Base    *Entry // nil where the side has no entry at Path
	Ours    *Entry
	Theirs  *Entry
	Markers bool // the merged file at Path contains conflict markers
}

// MergeOptions tunes MergeTrees; the zero value gives the defaults.
type MergeOptions struct {
	OursLabel   string // conflict marker label; default "ours"
	TheirsLabel string // default "theirs"
	MaxTextSize int64  // default MaxTextMergeSize
}

// MergeResult is the outcome of MergeTrees.
type MergeResult struct {
	Tree      Digest     // the merged tree, stored
	Conflicts []Conflict // sorted by path; empty for a clean merge
}

// Clean reports whether the merge had no conflicts.
func (r MergeResult) Clean() bool { return len(r.Conflicts) == 0 }

// MergeTrees merges the trees ours and theirs, descendants of base (use
// EmptyTree() when there is no common ancestor), path by path:
//
//   - both sides agree (including both deleted) → that;
//   - one side changed (modified, added, deleted) → that side;
//   - both changed a file from a common base file → MergeText if all three
//     are UTF-8 without NUL and within MaxTextSize, else a binary conflict;
//     the mode (of directories too) merges bit by bit;
//   - both changed a directory → merged entry by entry; one side deleted
//     a directory the other changed → the unchanged entries are deleted and
//     the changed ones are modify/delete conflicts;
//   - delete vs modify, add/add with different content, file vs directory,
//     differing symlinks → a Conflict (see ConflictKind for what the
//     merged tree holds at that path).
//
// The merged tree and any new blobs are written to the store, so the
// caller can materialize it, conflict markers included.
func (s *Store) MergeTrees(ctx context.Context, base, ours, theirs Digest, opts MergeOptions) (MergeResult, error) {
	for _, d := range []Digest{base, ours, theirs} {
		if err := d.Validate(); err != nil {
			return MergeResult{}, fmt.Errorf("merge: %w", err)
		}
	}
	opts.OursLabel = cmp.Or(opts.OursLabel, "ours")
	opts.TheirsLabel = cmp.Or(opts.TheirsLabel, "theirs")
	if opts.MaxTextSize <= 0 {
		opts.MaxTextSize = MaxTextMergeSize
	}
	if strings.ContainsAny(opts.OursLabel+opts.TheirsLabel, "\r\n") {
		return MergeResult{}, fmt.Errorf("merge: conflict labels must be single lines")
	}
	m := &treeMerger{s: s, ctx: ctx, opts: opts}
	d, err := m.dir("", base, ours, theirs, 0)
	if err != nil {
		return MergeResult{}, fmt.Errorf("merge: %w", err)
	}
	slices.SortFunc(m.conflicts, func(a, b Conflict) int { return cmp.Compare(a.Path, b.Path) })
	return MergeResult{Tree: d, Conflicts: m.conflicts}, nil
}

type treeMerger struct {
	s         *Store
	ctx       context.Context
	opts      MergeOptions
	conflicts []Conflict
}

// dir merges three directory trees and stores the result.
func (m *treeMerger) dir(at string, base, ours, theirs Digest, depth int) (Digest, error) {
	switch {
	case ours == theirs, base == theirs:
		return ours, nil
	case base == ours:
		return theirs, nil
	}
	t, err := m.dirEntries(at, base, ours, theirs, depth)
	if err != nil {
		return Digest{}, err
	}
	return m.s.PutTree(t)
}

func (m *treeMerger) dirEntries(at string, base, ours, theirs Digest, depth int) (Tree, error) {
	if err := m.ctx.Err(); err != nil {
		return Tree{}, err
	}
	if depth > MaxTreeDepth {
		return Tree{}, fmt.Errorf("%s: %w: deeper than %d levels", at, ErrInvalidTree, MaxTreeDepth)
	}
	var trees [3]Tree
	for i, d := range []Digest{base, ours, theirs} {
		t, err := m.s.ReadTree(d)
		if err != nil {
			return Tree{}, err
		}
		trees[i] = t
	}
	var names []string
	for _, t := range trees {
		for _, e := range t.Entries {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)

	var out Tree
	for _, name := range names {
		var sides [3]*Entry
		for i, t := range trees {
			if e, ok := t.Lookup(name); ok {
				sides[i] = &e
			}
		}
		e, err := m.entry(path.Join(at, name), sides[0], sides[1], sides[2], depth)
		if err != nil {
			return Tree{}, err
		}
		if e != nil {
			e.Name = name
			out.Entries = append(out.Entries, *e)
		}
	}
	return out, nil
}

func same(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Same(*b)
}

func isDir(e *Entry) bool  { return e != nil && e.Type == EntryDir }
func isFile(e *Entry) bool { return e != nil && e.Type == EntryFile }

// entry merges one name; nil means "no entry".
func (m *treeMerger) entry(p string, b, o, t *Entry, depth int) (*Entry, error) {
	switch {
	case same(o, t):
		return o, nil
	case same(b, o):
		return t, nil
	case same(b, t):
		return o, nil
	}
	conflict := func(kind ConflictKind, keep *Entry) (*Entry, error) {
		m.conflicts = append(m.conflicts, Conflict{Path: p, Kind: kind, Base: b, Ours: o, Theirs: t})
		return keep, nil
	}

	// Directories (a missing side counts as an empty directory when the
	// other side is a directory).
	if (isDir(o) || o == nil) && (isDir(t) || t == nil) {
		empty := EmptyTree()
		dig := func(e *Entry) Digest {
			if isDir(e) {
				return e.Digest
			}
			return empty
		}
		d, err := m.dir(p, dig(b), dig(o), dig(t), depth+1)
		if err != nil {
			return nil, err
		}
		if d == empty && (o == nil || t == nil) {
			return nil, nil // a deleted directory whose changes were all deletions
		}
		var perm fs.FileMode
		switch {
		case o == nil:
			perm = t.Perm()
		case t == nil:
			perm = o.Perm()
		case isDir(b):
			perm = mergePerm(b.Perm(), o.Perm(), t.Perm())
		default:
			perm = o.Perm()
		}
		return ptr(Entry{Type: EntryDir, Digest: d}.WithPerm(perm)), nil
	}
	switch {
	case isDir(o) || isDir(t):
		return conflict(ConflictFileDirectory, o)
	case o == nil:
		return conflict(ConflictModifyDelete, t)
	case t == nil:
		return conflict(ConflictModifyDelete, o)
	case o.Type == EntrySymlink || t.Type == EntrySymlink:
		return conflict(ConflictSymlink, o)
	}

	// Both are files that differ.
	kind := ConflictContent
	var baseDigest Digest
	perm := o.Perm()
	if isFile(b) {
		baseDigest = b.Digest
		perm = mergePerm(b.Perm(), o.Perm(), t.Perm())
	} else {
		kind = ConflictAddAdd
		baseDigest = DigestOf(nil)
		if o.Executable != t.Executable && o.Digest == t.Digest {
			return conflict(ConflictAddAdd, o)
		}
	}
	switch {
	case o.Digest == t.Digest:
		return ptr(Entry{Type: EntryFile, Digest: o.Digest}.WithPerm(perm)), nil
	case isFile(b) && b.Digest == o.Digest:
		return ptr(Entry{Type: EntryFile, Digest: t.Digest}.WithPerm(perm)), nil
	case isFile(b) && b.Digest == t.Digest:
		return ptr(Entry{Type: EntryFile, Digest: o.Digest}.WithPerm(perm)), nil
	}
	texts, ok, err := m.loadText(baseDigest, o.Digest, t.Digest)
	if err != nil {
		return nil, err
	}
	if !ok {
		if kind == ConflictContent {
			kind = ConflictBinary
		}
		return conflict(kind, o)
	}
	merged, n := MergeText(texts[0], texts[1], texts[2], m.opts.OursLabel, m.opts.TheirsLabel)
	d, err := m.s.Add(merged)
	if err != nil {
		return nil, err
	}
	e := ptr(Entry{Type: EntryFile, Digest: d}.WithPerm(perm))
	if n > 0 || kind == ConflictAddAdd {
		m.conflicts = append(m.conflicts, Conflict{Path: p, Kind: kind, Base: b, Ours: o, Theirs: t, Markers: n > 0})
	}
	return e, nil
}

// mergePerm merges permission bits one by one: the bits ours changed are
// ours, the others theirs (two sides that changed a bit alike agree).
func mergePerm(base, ours, theirs fs.FileMode) fs.FileMode {
	changed := base ^ ours
	return ours&changed | theirs&^changed
}

func ptr(e Entry) *Entry { return &e }

// loadText reads three blobs for a text merge; ok is false when any is too
// large, not UTF-8, or contains NUL.
func (m *treeMerger) loadText(ds ...Digest) (texts [3][]byte, ok bool, err error) {
	for _, d := range ds {
		if d.Size > m.opts.MaxTextSize {
			return texts, false, nil
		}
	}
	for i, d := range ds {
		data := []byte{}
		if d.Size > 0 {
			if data, err = m.s.Read(d); err != nil {
				return texts, false, err
			}
		}
		if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
			return texts, false, nil
		}
		texts[i] = data
	}
	return texts, true, nil
}

// TheirsToMerge lists the blobs of theirs that MergeTrees would read for
// a text merge (a file both sides changed, each within MaxTextMergeSize)
// and s lacks: what a dry run must fetch to say whether the merge
// conflicts, without fetching the rest of theirs' blobs.
func (s *Store) TheirsToMerge(ctx context.Context, base, ours, theirs Digest) ([]Digest, error) {
	flat := make([]map[string]Entry, 3)
	for i, d := range []Digest{base, ours, theirs} {
		var err error
		if flat[i], err = s.Flatten(ctx, d); err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
	}
	b, o := flat[0], flat[1]
	var want []Digest
	seen := map[Digest]bool{}
	for p, t := range flat[2] {
		o, ok := o[p]
		if !ok || o.Type != EntryFile || t.Type != EntryFile || o.Digest == t.Digest {
			continue
		}
		base := DigestOf(nil)
		if b, ok := b[p]; ok && b.Type == EntryFile {
			if b.Digest == o.Digest || b.Digest == t.Digest {
				continue // one side's change, taken whole
			}
			base = b.Digest
		}
		if max(base.Size, o.Digest.Size, t.Digest.Size) > MaxTextMergeSize || seen[t.Digest] {
			continue
		}
		seen[t.Digest] = true
		want = append(want, t.Digest)
	}
	var lacking []Digest
	for part := range slices.Chunk(want, MaxHasDigests) {
		m, err := s.Has(ctx, part)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		lacking = append(lacking, m...)
	}
	return lacking, nil
}
