package cas

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
)

// IngestProblem is one file or directory Ingest could not take in. The
// tree it returns simply lacks that entry; the caller decides whether that
// is acceptable, and must tell the operator.
type IngestProblem struct {
	Path string // slash-separated, relative to the ingested directory
	Err  error
}

func (p IngestProblem) Error() string { return p.Path + ": " + p.Err.Error() }

// smallFile is the size up to which Ingest reads a file in one go; larger
// files are hashed first and copied only if the store lacks them.
const smallFile = 1 << 20

type ingestNode struct {
	rel     string
	depth   int
	entries []Entry
	files   []int // indexes into the job list, for entries filled in later
	subdirs []*ingestNode
}

type ingestJob struct {
	rel    string
	name   string
	info   fs.FileInfo // from the directory walk (lstat), for the stat cache
	node   *ingestNode
	d      Digest
	exec   bool
	staged string // temporary file holding the content, when the store lacked it
	err    error
}

// Ingest stores the directory dir (files, executable bits, symlinks,
// subdirectories) and returns the digest of its root tree. Symlinks are
// stored as links, never followed. Entries it cannot take — unreadable
// files or directories, special files, names that are not valid UTF-8,
// symlinks whose targets are absolute or leave dir — are left out and
// listed in problems, sorted by path. err is set only when nothing useful
// could be produced (dir unreadable, store failure, ctx done).
func (s *Store) Ingest(ctx context.Context, dir string) (root Digest, problems []IngestProblem, err error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	defer r.Close()
	return s.ingest(ctx, r, dir, s.openStatCache(dir))
}

// IngestIn is Ingest of the directory name inside root (a daemon's allowed
// root): nothing outside root is read, whatever links the path holds.
func (s *Store) IngestIn(ctx context.Context, root *os.Root, name string) (Digest, []IngestProblem, error) {
	r, err := root.OpenRoot(name)
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", name, err)
	}
	defer r.Close()
	return s.ingest(ctx, r, name, s.openStatCache(filepath.Join(root.Name(), name)))
}

func (s *Store) ingest(ctx context.Context, r *os.Root, dir string, cache *statCache) (root Digest, problems []IngestProblem, err error) {
	var jobs []*ingestJob
	top, err := s.ingestWalk(ctx, r, ".", 0, &jobs, &problems)
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	err = s.ingestFiles(ctx, r, jobs, cache)
	var staged []stagedObject
	for _, j := range jobs {
		if j.staged != "" {
			staged = append(staged, stagedObject{d: j.d, tmp: j.staged})
		}
		if j.err != nil {
			problems = append(problems, IngestProblem{Path: j.rel, Err: j.err})
		}
	}
	if err == nil {
		err = s.commit(staged)
	}
	if err != nil {
		removeStaged(staged)
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	// Trees go in layers by height, so each lands after its children.
	var layers [][]Object
	root, _, err = s.ingestTrees(ctx, top, jobs, &layers)
	if err == nil {
		err = s.commitLayers(layers)
	}
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	cache.save()
	slices.SortFunc(problems, func(a, b IngestProblem) int { return cmp.Compare(a.Path, b.Path) })
	return root, problems, nil
}

// ingestWalk reads directories (cheap, sequential) and queues file jobs.
func (s *Store) ingestWalk(ctx context.Context, r *os.Root, rel string, depth int, jobs *[]*ingestJob, problems *[]IngestProblem) (*ingestNode, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	node := &ingestNode{rel: rel, depth: depth}
	f, err := r.Open(rel)
	if err != nil {
		return nil, err
	}
	list, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	for _, de := range list {
		name := de.Name()
		p := path.Join(rel, name)
		if err := ValidateName(name); err != nil {
			*problems = append(*problems, IngestProblem{Path: p, Err: err})
			continue
		}
		switch t := de.Type(); {
		case t.IsDir():
			sub, err := s.ingestWalk(ctx, r, p, depth+1, jobs, problems)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				*problems = append(*problems, IngestProblem{Path: p, Err: fmt.Errorf("directory skipped: %w", err)})
				continue
			}
			node.subdirs = append(node.subdirs, sub)
		case t&fs.ModeSymlink != 0:
			target, err := r.Readlink(p)
			if err == nil {
				err = ValidateSymlinkAt(target, depth)
			}
			if err != nil {
				*problems = append(*problems, IngestProblem{Path: p, Err: fmt.Errorf("symlink skipped: %w", err)})
				continue
			}
			node.entries = append(node.entries, Entry{Name: name, Type: EntrySymlink, Target: target})
		case t.IsRegular():
			info, _ := de.Info()
			node.files = append(node.files, len(*jobs))
			*jobs = append(*jobs, &ingestJob{rel: p, name: name, info: info, node: node})
		default:
			*problems = append(*problems, IngestProblem{Path: p, Err: fmt.Errorf("skipped: a %s is not a file, directory or symlink", describeMode(t))})
		}
	}
	return node, nil
}

func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	default:
		return "special file"
	}
}

// ingestFiles hashes files in parallel and stages those the store lacks:
// the work is dominated by read latency, which overlaps well. Files the stat
// cache vouches for are not read at all.
func (s *Store) ingestFiles(ctx context.Context, r *os.Root, jobs []*ingestJob, cache *statCache) error {
	var mu sync.Mutex
	var fatal error
	err := parallel(len(jobs), func(i int) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		j := jobs[i]
		if d, ok := cache.lookup(j.rel, j.info); ok {
			if present, err := s.present(d); err == nil && present {
				j.d, j.exec = d, j.info.Mode().Perm()&0o100 != 0
				cache.record(j.rel, j.info, d)
				return nil
			}
		}
		j.d, j.exec, j.staged, j.err = s.ingestFile(ctx, r, j.rel)
		if j.err == nil {
			cache.record(j.rel, j.info, j.d)
		}
		var se *storeError
		if errors.As(j.err, &se) {
			mu.Lock()
			fatal = cmp.Or(fatal, se.err)
			mu.Unlock()
		}
		return nil
	})
	return cmp.Or(err, fatal)
}

// storeError marks a failure of the store itself (not of the file being
// read), which aborts the ingest instead of becoming a problem.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

// ingestFile hashes one file and, if the store lacks it, stages its
// content. It returns the digest, the executable bit and the staged file.
func (s *Store) ingestFile(ctx context.Context, r *os.Root, rel string) (Digest, bool, string, error) {
	f, err := r.Open(rel)
	if err != nil {
		return Digest{}, false, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Digest{}, false, "", err
	}
	if !fi.Mode().IsRegular() {
		return Digest{}, false, "", errors.New("skipped: it stopped being a regular file while being read")
	}
	exec := fi.Mode().Perm()&0o100 != 0 // the owner's bit, as git records it
	if fi.Size() <= smallFile {
		data, err := io.ReadAll(io.LimitReader(f, smallFile+1))
		if err != nil {
			return Digest{}, false, "", err
		}
		if len(data) > smallFile {
			return Digest{}, false, "", errors.New("skipped: it grew while being read; ingest again")
		}
		d := DigestOf(data)
		if ok, err := s.present(d); err != nil {
			return Digest{}, false, "", &storeError{err}
		} else if ok {
			return d, exec, "", nil
		}
		tmp, err := s.stageBytes(data)
		if err != nil {
			return Digest{}, false, "", &storeError{err}
		}
		return d, exec, tmp, nil
	}
	// Large: hash first and copy only if the store lacks the content.
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return Digest{}, false, "", err
	}
	d := Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: n}
	if ok, err := s.present(d); err != nil {
		return Digest{}, false, "", &storeError{err}
	} else if ok {
		return d, exec, "", nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Digest{}, false, "", err
	}
	tmp, again, err := s.stageReader(ctx, f)
	if err != nil {
		return Digest{}, false, "", err
	}
	if again != d {
		os.Remove(tmp)
		return Digest{}, false, "", errors.New("skipped: it changed while being read; ingest again")
	}
	return d, exec, tmp, nil
}

// stageReader copies r into a new temporary file, hashing on the way.
// Failures writing the store are *storeError; failures reading r are not.
func (s *Store) stageReader(ctx context.Context, r io.Reader) (string, Digest, error) {
	f, err := s.newTemp("obj")
	if err != nil {
		return "", Digest{}, &storeError{err}
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if cerr := f.Close(); err == nil && cerr != nil {
		err = &storeError{cerr}
	}
	if err != nil {
		os.Remove(f.Name())
		return "", Digest{}, err
	}
	return f.Name(), Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

// ingestTrees encodes the trees bottom-up and files each into layers by
// its height (0 for a directory without subdirectories). It returns the
// digest and height of n.
func (s *Store) ingestTrees(ctx context.Context, n *ingestNode, jobs []*ingestJob, layers *[][]Object) (Digest, int, error) {
	if err := ctx.Err(); err != nil {
		return Digest{}, 0, err
	}
	entries := n.entries
	for _, i := range n.files {
		j := jobs[i]
		if j.err == nil {
			entries = append(entries, Entry{Name: j.name, Type: EntryFile, Digest: j.d, Executable: j.exec})
		}
	}
	height := 0
	for _, sub := range n.subdirs {
		d, h, err := s.ingestTrees(ctx, sub, jobs, layers)
		if err != nil {
			return Digest{}, 0, err
		}
		height = max(height, h+1)
		entries = append(entries, Entry{Name: path.Base(sub.rel), Type: EntryDir, Digest: d})
	}
	slices.SortFunc(entries, func(a, b Entry) int { return cmp.Compare(a.Name, b.Name) })
	data, err := Tree{Entries: entries}.Encode()
	if err != nil {
		return Digest{}, 0, fmt.Errorf("directory %s: %w", n.rel, err)
	}
	for len(*layers) <= height {
		*layers = append(*layers, nil)
	}
	d := DigestOf(data)
	(*layers)[height] = append((*layers)[height], Object{Digest: d, Data: data})
	return d, height, nil
}
