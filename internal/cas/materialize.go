package cas

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Limits that stop a hostile tree (a small DAG can name an exponential
// number of paths) from exhausting the disk or the stack.
const (
	MaxTreeDepth          = 512
	MaxMaterializeEntries = 4 << 20
)

// ErrOutsideRoots is returned (wrapped) by MaterializeWithin for a
// destination that is in none of the allowed roots.
var ErrOutsideRoots = errors.New("destination outside the allowed roots")

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

// Materialize writes tree to the directory dest (see MaterializeIn for how
// an existing dest is replaced). dest's parent is created if needed; links
// in the path leading to dest are followed, since the caller chose it.
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

// MaterializeWithin writes tree to the absolute directory dest, which must
// lie strictly inside one of the allowed root directories (compared by
// path components: /base2 is not inside /base). All writes go through an
// os.Root opened at that root, so no symlink on the way can lead outside it.
func (s *Store) MaterializeWithin(ctx context.Context, tree Digest, dest string, allowed []string) error {
	if !filepath.IsAbs(dest) {
		return fmt.Errorf("materialize %s: %w: the destination must be an absolute path", dest, ErrOutsideRoots)
	}
	dest = filepath.Clean(dest)
	best, rel := "", ""
	for _, a := range allowed {
		if !filepath.IsAbs(a) {
			continue
		}
		a = filepath.Clean(a)
		r, err := filepath.Rel(a, dest)
		if err != nil || !filepath.IsLocal(r) || r == "." {
			continue
		}
		if len(a) > len(best) {
			best, rel = a, r
		}
	}
	if best == "" {
		return fmt.Errorf("materialize %s: %w (%s); choose a directory inside one of them", dest, ErrOutsideRoots, strings.Join(allowed, ", "))
	}
	r, err := os.OpenRoot(best)
	if err != nil {
		return fmt.Errorf("materialize %s: open root %s: %w", dest, best, err)
	}
	defer r.Close()
	return s.MaterializeIn(ctx, r, rel, tree)
}

// MaterializeIn writes tree to the directory name inside root.
//
// The whole tree is read and checked first; a tree with a bad entry
// (invalid or duplicate name, unsorted entries, a symlink that is absolute
// or would climb out of the destination, too deep) is refused before
// anything is written. The tree is then written into a fresh staging
// directory beside name — directories, then files (verified as they are
// read from the store, executable bit restored), then symlinks, so no write
// ever passes through a link — and swapped into place:
//
//   - if name does not exist, the staging directory is renamed to it;
//   - if name is a directory, it is renamed aside, the staging directory
//     renamed to name, and the old directory removed only after that
//     succeeded; if the second rename fails the old one is put back. Its
//     previous contents are replaced entirely, including files the tree does
//     not mention. There is a brief moment when name does not exist.
//   - if name is anything else (a file, a symlink), it is refused.
//
// On failure the staging directory is removed and name is left as it was.
// File modes are 0644 or 0755 and directories 0755, less the umask.
// Materialized files are not fsynced: the tree stays in the store and can
// be written again.
func (s *Store) MaterializeIn(ctx context.Context, root *os.Root, name string, tree Digest) error {
	_, err := s.Update(ctx, root, name, tree)
	return err
}

// Update is MaterializeIn for a destination that may already hold most of
// the tree: when name is a directory, it is read through the store's stat
// cache first; if it already holds tree nothing is written and changed is
// false; otherwise the files it holds unchanged (same path, content and
// executable bit) are hard-linked into the staging directory rather than
// copied, so a one-file change costs one write. Afterwards the stat cache
// knows the new files, so the next check is a stat per file.
func (s *Store) Update(ctx context.Context, root *os.Root, name string, tree Digest) (changed bool, err error) {
	clean := filepath.Clean(name)
	if !filepath.IsLocal(clean) || clean == "." {
		return false, fmt.Errorf("materialize %q: the destination must be a directory below the root; name one", name)
	}
	if err := tree.Validate(); err != nil {
		return false, fmt.Errorf("materialize %s: %w", clean, err)
	}
	p, err := s.plan(ctx, tree)
	if err != nil {
		return false, err
	}

	parent := filepath.Dir(clean)
	if err := root.MkdirAll(parent, 0o755); err != nil {
		return false, fmt.Errorf("materialize %s: create parent: %w", clean, err)
	}
	exists := false
	switch fi, err := root.Lstat(clean); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("materialize %s: %w", clean, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return false, fmt.Errorf("materialize %s: the destination is a symlink; remove it or materialize to where it points", clean)
	case !fi.IsDir():
		return false, fmt.Errorf("materialize %s: the destination exists and is not a directory; remove it or choose another", clean)
	default:
		exists = true
	}
	reuse := map[string]Entry{}
	if exists {
		have, problems, err := s.IngestIn(ctx, root, clean)
		if err == nil && len(problems) == 0 {
			if have == tree {
				return false, nil
			}
			if reuse, err = s.fileEntries(ctx, have); err != nil {
				reuse = map[string]Entry{}
			}
		}
	}

	stage := filepath.Join(parent, ".rex-stage-"+randomSuffix())
	if err := root.Mkdir(stage, 0o755); err != nil {
		return false, fmt.Errorf("materialize %s: create staging directory: %w", clean, err)
	}
	if err := s.writePlan(ctx, root, stage, p, clean, reuse); err != nil {
		root.RemoveAll(stage)
		return false, fmt.Errorf("materialize %s: %w", clean, err)
	}

	if !exists {
		if err := root.Rename(stage, clean); err != nil {
			root.RemoveAll(stage)
			return false, fmt.Errorf("materialize %s: %w", clean, err)
		}
		s.seedStatCache(root, clean, p)
		return true, nil
	}
	old := filepath.Join(parent, ".rex-old-"+randomSuffix())
	if err := root.Rename(clean, old); err != nil {
		root.RemoveAll(stage)
		return false, fmt.Errorf("materialize %s: move the old directory aside: %w", clean, err)
	}
	if err := root.Rename(stage, clean); err != nil {
		if rerr := root.Rename(old, clean); rerr != nil {
			return false, fmt.Errorf("materialize %s: %w; the previous contents are at %s and the new at %s", clean, err, old, stage)
		}
		root.RemoveAll(stage)
		return false, fmt.Errorf("materialize %s: %w", clean, err)
	}
	s.seedStatCache(root, clean, p)
	if err := root.RemoveAll(old); err != nil {
		return true, fmt.Errorf("materialize %s: the tree is in place, but the previous contents remain at %s (%v); remove them", clean, old, err)
	}
	return true, nil
}

// fileEntries lists the files of tree by their slash path.
func (s *Store) fileEntries(ctx context.Context, tree Digest) (map[string]Entry, error) {
	out := map[string]Entry{}
	var walk func(d Digest, rel string) error
	walk = func(d Digest, rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := s.ReadTree(d)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			child := path.Join(rel, e.Name)
			switch e.Type {
			case EntryDir:
				if err := walk(e.Digest, child); err != nil {
					return err
				}
			case EntryFile:
				out[child] = e
			}
		}
		return nil
	}
	return out, walk(tree, "")
}

// seedStatCache records the files just written at dest, so the next
// Update or IngestIn of dest reads none of them (those written within the
// racy window excepted).
func (s *Store) seedStatCache(root *os.Root, dest string, p *plan) {
	cache := s.openStatCache(filepath.Join(root.Name(), dest))
	d, err := root.OpenRoot(dest)
	if err != nil {
		return
	}
	defer d.Close()
	for _, pe := range p.files {
		if fi, err := d.Lstat(filepath.FromSlash(pe.rel)); err == nil {
			cache.record(pe.rel, fi, pe.e.Digest)
		}
	}
	cache.save()
}

// plannedEntry is one entry to write, at a path relative to the
// destination.
type plannedEntry struct {
	rel string
	e   Entry
}

type plan struct {
	dirs, files, links []plannedEntry
}

// plan reads every tree under root and checks every rule, so nothing is
// written for a bad tree.
func (s *Store) plan(ctx context.Context, root Digest) (*plan, error) {
	cache := map[Digest]Tree{}
	read := func(d Digest, rel string) (Tree, error) {
		if t, ok := cache[d]; ok {
			return t, nil
		}
		t, err := s.ReadTree(d)
		if err != nil {
			return Tree{}, &MaterializeError{Path: rel, Err: err}
		}
		cache[d] = t
		return t, nil
	}

	// Size the tree first over its distinct subtrees, so a small DAG that
	// names billions of paths is refused at once.
	type size struct{ entries, depth int }
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
			if e.Type != EntryDir {
				continue
			}
			sub, err := measure(e.Digest, path.Join(rel, e.Name), depth+1)
			if err != nil {
				return size{}, err
			}
			sz.entries = min(sz.entries+sub.entries, MaxMaterializeEntries+1)
			sz.depth = max(sz.depth, sub.depth+1)
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

	p := &plan{}
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

func (s *Store) writePlan(ctx context.Context, root *os.Root, stage string, p *plan, dest string, reuse map[string]Entry) error {
	at := func(rel string) string { return filepath.Join(stage, filepath.FromSlash(rel)) }
	for _, pe := range p.dirs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := root.Mkdir(at(pe.rel), 0o755); err != nil {
			return fmt.Errorf("create directory %s: %w", pe.rel, err)
		}
	}
	// Files are written several at a time, each through a handle on its own
	// directory opened once: a create is then one lookup, not one per path
	// component, and file-system latency overlaps.
	var mu sync.Mutex
	dirs := map[string]*os.Root{}
	defer func() {
		for _, d := range dirs {
			d.Close()
		}
	}()
	dirOf := func(rel string) (*os.Root, error) {
		mu.Lock()
		defer mu.Unlock()
		if d, ok := dirs[rel]; ok {
			return d, nil
		}
		d, err := root.OpenRoot(at(rel))
		if err != nil {
			return nil, err
		}
		dirs[rel] = d
		return d, nil
	}
	err := parallel(len(p.files), func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		pe := p.files[i]
		if old, ok := reuse[pe.rel]; ok && old.Digest == pe.e.Digest && old.Executable == pe.e.Executable {
			// Unchanged in the current destination: link, do not copy. Only
			// a file with no other name is shared, so the new tree never
			// holds a second name of some file elsewhere.
			src := filepath.Join(dest, filepath.FromSlash(pe.rel))
			if fi, err := root.Lstat(src); err == nil && fi.Mode().IsRegular() && soleLink(fi) {
				if root.Link(src, at(pe.rel)) == nil {
					return nil
				}
			}
		}
		dir, name := path.Split(pe.rel)
		d, err := dirOf(path.Clean(dir))
		if err == nil {
			err = s.writeFile(d, name, pe.e)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", pe.rel, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, pe := range p.links {
		if err := root.Symlink(pe.e.Target, at(pe.rel)); err != nil {
			return fmt.Errorf("create symlink %s: %w", pe.rel, err)
		}
	}
	return nil
}

func (s *Store) writeFile(root *os.Root, name string, e Entry) error {
	src, err := s.Open(e.Digest)
	if err != nil {
		return err
	}
	defer src.Close()
	perm := os.FileMode(0o644)
	if e.Executable {
		perm = 0o755
	}
	// O_EXCL: the staging directory is fresh, so anything already there is
	// an attack or a bug, never something to write through.
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// soleLink reports whether a file has exactly one name.
func soleLink(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1
}
