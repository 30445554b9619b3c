package cas

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// Limits that stop a hostile tree (a small DAG can name an exponential
// number of paths) from exhausting the disk or the stack.
const (
	MaxTreeDepth          = 512
	MaxMaterializeEntries = 4 << 20
)

// MaterializeError reports the entry that stopped a materialization. It
// happens before anything is written when the tree itself is at fault.
type MaterializeError struct {
	Path string // slash-separated, relative to the destination
	Err  error
}

func (e *MaterializeError) Error() string {
	p := e.Path
	if p == "" {
		p = "."
	}
	return fmt.Sprintf("materialize: entry %q: %v", p, e.Err)
}

func (e *MaterializeError) Unwrap() error { return e.Err }

// Materialize writes tree to the directory dest, replacing what it held
// (an atomic Update: see UpdateOptions.Atomic). dest's parent is created
// if needed; links in the path leading to dest are followed, since the
// caller chose it.
func (s *Store) Materialize(ctx context.Context, tree Digest, dest string) error {
	abs, err := filepath.Abs(dest)
	if err != nil {
		return fmt.Errorf("materialize %s: %w", dest, err)
	}
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if abs == parent {
		return fmt.Errorf("materialize %s: the destination cannot be the file system root; choose a directory", dest)
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("materialize %s: %w", dest, err)
	}
	r, err := os.OpenRoot(parent)
	if err != nil {
		return fmt.Errorf("materialize %s: %w", dest, err)
	}
	defer r.Close()
	return s.MaterializeIn(ctx, r, base, tree)
}

// MaterializeIn writes tree to the directory name inside root, replacing
// what it held: an atomic Update. The whole tree is read and checked
// first; a tree with a bad entry (invalid or duplicate name, unsorted
// entries, a symlink that is absolute or would climb out of the
// destination, too deep, too large) is refused before anything is written.
func (s *Store) MaterializeIn(ctx context.Context, root *os.Root, name string, tree Digest) error {
	_, err := s.Update(ctx, root, name, tree, UpdateOptions{Atomic: true})
	return err
}

// plannedEntry is one entry to write, at a path relative to the
// destination.
type plannedEntry struct {
	rel string
	e   Entry
}

type plan struct {
	dirs, files, links []plannedEntry
	bytes              int64 // the file bytes the whole tree holds
}

// plan reads every tree under root and checks every rule, so nothing is
// written for a bad tree. A tree whose files hold more than limit bytes in
// all (limit < 0: no limit) is refused before its paths are listed: a small
// DAG can name terabytes.
func (s *Store) plan(ctx context.Context, root Digest, limit int64) (*plan, error) {
	// Each distinct tree is read once per plan (a DAG may name one many
	// times), and once per process while the store's cache keeps it.
	cache := map[Digest]Tree{}
	read := func(d Digest, rel string) (Tree, error) {
		if t, ok := cache[d]; ok {
			return t, nil
		}
		t, ok := s.trees.get(d)
		if !ok {
			var err error
			if t, err = s.ReadTree(d); err != nil {
				return Tree{}, &MaterializeError{Path: rel, Err: err}
			}
			s.trees.put(d, t)
		}
		cache[d] = t
		return t, nil
	}

	// Size the tree first over its distinct subtrees, so a small DAG that
	// names billions of paths is refused at once.
	type size struct {
		entries, depth int
		bytes          int64 // saturating at maxBytes
	}
	const maxBytes = 1 << 62
	sizes := map[Digest]size{}
	var measure func(d Digest, rel string, depth int) (size, error)
	measure = func(d Digest, rel string, depth int) (size, error) {
		if sz, ok := sizes[d]; ok {
			return sz, nil
		}
		if err := ctx.Err(); err != nil {
			return size{}, err
		}
		if depth > MaxTreeDepth {
			return size{}, &MaterializeError{Path: rel, Err: fmt.Errorf("%w: deeper than %d levels", ErrInvalidTree, MaxTreeDepth)}
		}
		t, err := read(d, rel)
		if err != nil {
			return size{}, err
		}
		sz := size{entries: len(t.Entries)}
		for _, e := range t.Entries {
			if e.Type == EntryFile {
				sz.bytes = min(sz.bytes+e.Digest.Size, maxBytes)
			}
			if e.Type != EntryDir {
				continue
			}
			sub, err := measure(e.Digest, path.Join(rel, e.Name), depth+1)
			if err != nil {
				return size{}, err
			}
			sz.entries = min(sz.entries+sub.entries, MaxMaterializeEntries+1)
			sz.depth = max(sz.depth, sub.depth+1)
			sz.bytes = min(sz.bytes+sub.bytes, maxBytes)
		}
		sizes[d] = sz
		return sz, nil
	}
	sz, err := measure(root, "", 0)
	if err != nil {
		return nil, err
	}
	if sz.entries > MaxMaterializeEntries || sz.depth > MaxTreeDepth {
		return nil, &MaterializeError{Err: fmt.Errorf("%w: more than %d entries or %d levels", ErrInvalidTree, MaxMaterializeEntries, MaxTreeDepth)}
	}

	p := &plan{bytes: sz.bytes}
	if limit >= 0 && sz.bytes > limit {
		return nil, &SpaceError{Needed: sz.bytes, Free: limit}
	}
	var walk func(d Digest, rel string, depth int) error
	walk = func(d Digest, rel string, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := read(d, rel)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			// Names were checked by DecodeTree; a symlink's escape depends
			// on where the tree is used, so it is checked here.
			child := path.Join(rel, e.Name)
			switch e.Type {
			case EntryDir:
				p.dirs = append(p.dirs, plannedEntry{child, e})
				if err := walk(e.Digest, child, depth+1); err != nil {
					return err
				}
			case EntryFile:
				p.files = append(p.files, plannedEntry{child, e})
			case EntrySymlink:
				if err := ValidateSymlinkAt(e.Target, depth); err != nil {
					return &MaterializeError{Path: child, Err: err}
				}
				p.links = append(p.links, plannedEntry{child, e})
			}
		}
		return nil
	}
	if err := walk(root, "", 0); err != nil {
		return nil, err
	}
	return p, nil
}
