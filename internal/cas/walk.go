package cas

import (
	"context"
	"fmt"
	"path"
)

// Flatten lists every entry under tree (directories, files, symlinks) by
// its slash-separated path relative to the tree.
func (s *Store) Flatten(ctx context.Context, tree Digest) (map[string]Entry, error) {
	out := map[string]Entry{}
	var walk func(d Digest, rel string, depth int) error
	walk = func(d Digest, rel string, depth int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if depth > MaxTreeDepth || len(out) > MaxMaterializeEntries {
			return fmt.Errorf("%w: more than %d entries or %d levels", ErrInvalidTree, MaxMaterializeEntries, MaxTreeDepth)
		}
		t, err := s.ReadTree(d)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			p := path.Join(rel, e.Name)
			out[p] = e
			if e.Type == EntryDir {
				if err := walk(e.Digest, p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(tree, "", 0)
}

// MapEntries stores and returns tree with fn applied to every file and
// directory entry (fn sees the entry's path and returns its replacement;
// names and types must stay). Subtrees come first, so fn sees a directory
// with its new digest.
func (s *Store) MapEntries(ctx context.Context, tree Digest, fn func(rel string, e Entry) Entry) (Digest, error) {
	var walk func(d Digest, rel string, depth int) (Digest, error)
	walk = func(d Digest, rel string, depth int) (Digest, error) {
		if err := ctx.Err(); err != nil {
			return Digest{}, err
		}
		if depth > MaxTreeDepth {
			return Digest{}, fmt.Errorf("%w: deeper than %d levels", ErrInvalidTree, MaxTreeDepth)
		}
		t, err := s.ReadTree(d)
		if err != nil {
			return Digest{}, err
		}
		out := Tree{Entries: make([]Entry, len(t.Entries))}
		for i, e := range t.Entries {
			p := path.Join(rel, e.Name)
			if e.Type == EntryDir {
				if e.Digest, err = walk(e.Digest, p, depth+1); err != nil {
					return Digest{}, err
				}
			}
			if e.Type != EntrySymlink {
				n := fn(p, e)
				n.Name, n.Type = e.Name, e.Type
				e = n
			}
			out.Entries[i] = e
		}
		return s.PutTree(out)
	}
	return walk(tree, "", 0)
}

// Removed lists the paths of from that to lacks, with their entries in
// from (directories too), walking only the subtrees that differ: what a
// change from one tree to the other deletes, without listing what stays.
func (s *Store) Removed(ctx context.Context, from, to Digest) (map[string]Entry, error) {
	out := map[string]Entry{}
	var walk func(a, b Digest, rel string, depth int) error
	walk = func(a, b Digest, rel string, depth int) error {
		if a == b {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if depth > MaxTreeDepth || len(out) > MaxMaterializeEntries {
			return fmt.Errorf("%w: more than %d entries or %d levels", ErrInvalidTree, MaxMaterializeEntries, MaxTreeDepth)
		}
		ta, err := s.ReadTree(a)
		if err != nil {
			return err
		}
		tb, err := s.ReadTree(b)
		if err != nil {
			return err
		}
		for _, e := range ta.Entries {
			p := path.Join(rel, e.Name)
			o, ok := tb.Lookup(e.Name)
			switch {
			case !ok || o.Type != e.Type && e.Type == EntryDir:
				out[p] = e
				if e.Type == EntryDir {
					sub, err := s.Flatten(ctx, e.Digest)
					if err != nil {
						return err
					}
					for q, se := range sub {
						out[path.Join(p, q)] = se
					}
				}
			case e.Type == EntryDir && o.Type == EntryDir:
				if err := walk(e.Digest, o.Digest, p, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk(from, to, "", 0)
}
