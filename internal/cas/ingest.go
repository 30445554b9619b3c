package cas

import (
	"bytes"
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
	"syscall"
	"time"
	"unicode/utf8"
)

// IngestProblem is one file or directory Ingest could not take in. The
// tree it returns simply lacks that entry; the caller decides whether that
// is acceptable, and must tell the operator.
type IngestProblem struct {
	Path string // slash-separated, relative to the ingested directory
	Err  error
}

func (p IngestProblem) Error() string { return p.Path + ": " + p.Err.Error() }

// IngestOptions tune IngestWith and IngestIn.
type IngestOptions struct {
	// Blobs says which files' contents are copied into the store. The
	// others are hashed (through the stat cache) and left where they are:
	// the store finds them there when a blob is asked for (see
	// Store.Read), verifying what it reads.
	Blobs BlobPolicy
	// KeepLeftovers leaves the temporary files of killed writers where they
	// are (they are skipped all the same): for a read that must change
	// nothing, such as a dry run or a pull's read of the remote side.
	KeepLeftovers bool
	// Verified, when set, gets the digest of every file this ingest read
	// and hashed, so that sending it from this process reads it without
	// hashing it again (the receiver checks every blob). Files the stat
	// cache vouched for were not read, and are not added.
	Verified *VerifiedSet
}

// BlobPolicy is which blobs an ingest copies into the store.
type BlobPolicy int

const (
	// BlobsAll copies every file the store lacks.
	BlobsAll BlobPolicy = iota
	// BlobsText copies only what a three-way merge may need later: text
	// files (valid UTF-8 without NUL) of at most MaxTextMergeSize. rex
	// ingests so: a push reads the rest from the files themselves.
	BlobsText
	// BlobsNone copies nothing: the trees only. A daemon serving a pull
	// ingests so, and writes nothing but a few trees.
	BlobsNone
)

// smallFile is the size up to which Ingest reads a file in one go; larger
// files are hashed first and copied only if the store lacks them.
const smallFile = 1 << 20

// ingestNode is one directory of a walk.
type ingestNode struct {
	rel     string
	depth   int
	info    fs.FileInfo // of the directory itself (nil for the top)
	entries []Entry     // symlinks, known at once
	files   []int       // indexes into the job list, for entries filled in later
	subdirs []*ingestNode
	others  []otherEntry // what a tree cannot hold: special files, bad names
}

// otherEntry is a name a tree cannot hold, kept so an update can still
// replace or delete it.
type otherEntry struct {
	name string
	info fs.FileInfo
	err  error
}

type ingestJob struct {
	rel    string
	name   string
	info   fs.FileInfo // from the directory walk (lstat), for the stat cache
	seen   time.Time   // just before that lstat
	node   *ingestNode
	d      Digest
	perm   fs.FileMode
	staged string // temporary file holding the content, when the store lacked it
	hashed bool   // d is the hash of the bytes read here, not the stat cache's
	err    error
}

// walk is a directory read by ingestWalk: its nodes and its files, hashed.
type walk struct {
	top  *ingestNode
	jobs []*ingestJob
}

// Ingest stores the directory dir (files with their modes, symlinks,
// subdirectories) and returns the digest of its root tree. Symlinks are
// stored as links, never followed. Entries it cannot take — unreadable
// files or directories, special files, names that are not valid UTF-8,
// symlinks whose targets are absolute or leave dir — are left out and
// listed in problems, sorted by path. err is set only when nothing useful
// could be produced (dir unreadable, store failure, ctx done).
//
// Temporary files and directories rex leaves while writing (".rex-tmp-",
// ".rex-stage-", ".rex-old-" followed by the writer's pid) are never taken
// in; those of a process of this machine that no longer runs are removed
// (unless IngestOptions.KeepLeftovers).
func (s *Store) Ingest(ctx context.Context, dir string) (root Digest, problems []IngestProblem, err error) {
	return s.IngestWith(ctx, dir, IngestOptions{})
}

// IngestWith is Ingest with options.
func (s *Store) IngestWith(ctx context.Context, dir string, opts IngestOptions) (Digest, []IngestProblem, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	defer r.Close()
	return s.ingest(ctx, r, dir, s.openStatCache(dir), opts)
}

// IngestIn is IngestWith of the directory name inside root (a daemon's
// allowed root): nothing outside root is read, whatever links the path
// holds.
func (s *Store) IngestIn(ctx context.Context, root *os.Root, name string, opts IngestOptions) (Digest, []IngestProblem, error) {
	// The trailing slash makes the kernel refuse anything but a directory
	// before opening it: a FIFO would wait for a writer.
	r, err := root.OpenRoot(name + "/")
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", name, err)
	}
	defer r.Close()
	return s.ingest(ctx, r, name, s.openStatCache(filepath.Join(root.Name(), name)), opts)
}

func (s *Store) ingest(ctx context.Context, r *os.Root, dir string, cache *statCache, opts IngestOptions) (root Digest, problems []IngestProblem, err error) {
	w, err := s.walkDir(ctx, r, cache, opts.Blobs, !opts.KeepLeftovers, &problems)
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	var staged []stagedObject
	for _, j := range w.jobs {
		if j.staged != "" {
			staged = append(staged, stagedObject{d: j.d, tmp: j.staged})
		}
		if j.err != nil {
			problems = append(problems, IngestProblem{Path: j.rel, Err: j.err})
		}
	}
	if err := s.commit(staged); err != nil {
		removeStaged(staged)
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	// Trees go in layers by height, so each lands after its children.
	var layers [][]Object
	root, _, err = s.ingestTrees(ctx, w.top, w.jobs, &layers)
	if err == nil {
		err = s.commitLayers(layers)
	}
	if err != nil {
		return Digest{}, nil, fmt.Errorf("ingest %s: %w", dir, err)
	}
	if opts.Blobs != BlobsAll && cache != nil {
		s.locator().note(cache.dir, w.jobs)
	}
	if opts.Verified != nil {
		for _, j := range w.jobs {
			if j.hashed && j.err == nil {
				opts.Verified.m.Store(j.d, struct{}{})
			}
		}
	}
	cache.save()
	slices.SortFunc(problems, func(a, b IngestProblem) int { return cmp.Compare(a.Path, b.Path) })
	return root, problems, nil
}

// IngestFile takes in the one file path: its content goes into the store
// as the policy says; otherwise the store notes where it is (for this
// process), to read it from there.
func (s *Store) IngestFile(p string, policy BlobPolicy) (Digest, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return Digest{}, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil { // named by the caller: followed
		return Digest{}, err
	}
	dir, name := filepath.Split(abs)
	r, err := os.OpenRoot(dir)
	if err != nil {
		return Digest{}, err
	}
	defer r.Close()
	info, err := r.Lstat(name)
	if err != nil {
		return Digest{}, err
	}
	d, staged, err := s.ingestFile(context.Background(), r, name, policy)
	if err != nil {
		return Digest{}, err
	}
	if staged != "" {
		if err := s.commit([]stagedObject{{d: d, tmp: staged}}); err != nil {
			os.Remove(staged)
			return Digest{}, err
		}
		return d, nil
	}
	if ok, _ := s.present(d); !ok {
		if k, ok := keyOf(info); ok {
			s.locator().noteFile(filepath.Clean(dir), name, d, k)
		}
	}
	return d, nil
}

// walkDir reads the directory tree of r and hashes its files (reading only
// those the stat cache does not vouch for), staging the content the store
// lacks of those the policy says. Problems are appended to problems. With
// sweep, leftovers of killed writers are removed on the way (never by a
// dry run).
func (s *Store) walkDir(ctx context.Context, r *os.Root, cache *statCache, stage BlobPolicy, sweep bool, problems *[]IngestProblem) (*walk, error) {
	w := &walk{}
	top, err := s.ingestWalk(ctx, r, ".", 0, nil, sweep, &w.jobs, problems)
	if err != nil {
		return nil, err
	}
	w.top = top
	if err := s.ingestFiles(ctx, r, w.jobs, cache, stage); err != nil {
		for _, j := range w.jobs {
			if j.staged != "" {
				os.Remove(j.staged)
			}
		}
		return nil, err
	}
	return w, nil
}

// ingestWalk reads directories (cheap, sequential) and queues file jobs.
func (s *Store) ingestWalk(ctx context.Context, r *os.Root, rel string, depth int, info fs.FileInfo, sweep bool, jobs *[]*ingestJob, problems *[]IngestProblem) (*ingestNode, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	node := &ingestNode{rel: rel, depth: depth, info: info}
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK, 0)
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
		if pid, host, ok := rexTemp(name); ok {
			if sweep && s.leftover(pid, host) {
				r.RemoveAll(p) // a killed writer's leftover
			}
			continue
		}
		seen := s.now()
		info, ierr := de.Info()
		if ierr != nil {
			if errors.Is(ierr, fs.ErrNotExist) {
				continue // gone since the directory was read
			}
			node.others = append(node.others, otherEntry{name: name, err: ierr})
			*problems = append(*problems, IngestProblem{Path: p, Err: ierr})
			continue
		}
		if err := ValidateName(name); err != nil {
			node.others = append(node.others, otherEntry{name: name, info: info, err: err})
			*problems = append(*problems, IngestProblem{Path: p, Err: err})
			continue
		}
		switch t := info.Mode().Type(); {
		case t.IsDir():
			sub, err := s.ingestWalk(ctx, r, p, depth+1, info, sweep, jobs, problems)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				err = fmt.Errorf("directory skipped: %w", err)
				node.others = append(node.others, otherEntry{name: name, info: info, err: err})
				*problems = append(*problems, IngestProblem{Path: p, Err: err})
				continue
			}
			node.subdirs = append(node.subdirs, sub)
		case t&fs.ModeSymlink != 0:
			target, err := r.Readlink(p)
			if err == nil {
				err = ValidateSymlinkAt(target, depth)
			}
			if err != nil {
				err = fmt.Errorf("symlink skipped: %w", err)
				node.others = append(node.others, otherEntry{name: name, info: info, err: err})
				*problems = append(*problems, IngestProblem{Path: p, Err: err})
				continue
			}
			node.entries = append(node.entries, Entry{Name: name, Type: EntrySymlink, Target: target})
		case t.IsRegular():
			node.files = append(node.files, len(*jobs))
			*jobs = append(*jobs, &ingestJob{rel: p, name: name, info: info, seen: seen, node: node})
		default:
			err := fmt.Errorf("skipped: a %s is not a file, directory or symlink", describeMode(t))
			node.others = append(node.others, otherEntry{name: name, info: info, err: err})
			*problems = append(*problems, IngestProblem{Path: p, Err: err})
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

// unixPerm is a file's permission bits in Unix's octal layout (what a tree
// records), from Go's FileMode.
func unixPerm(m fs.FileMode) fs.FileMode {
	p := m.Perm()
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

// goPerm is the inverse of unixPerm: what os.Chmod takes.
func goPerm(p fs.FileMode) fs.FileMode {
	m := p.Perm()
	if p&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if p&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if p&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// ingestFiles hashes files in parallel and stages those the store lacks
// that the policy says: the work is dominated by read latency, which
// overlaps well. Files the stat cache vouches for are not read at all.
func (s *Store) ingestFiles(ctx context.Context, r *os.Root, jobs []*ingestJob, cache *statCache, stage BlobPolicy) error {
	// What the stat cache vouches for costs a lookup: done here, in one
	// pass, and only the rest goes to the workers.
	var rest []*ingestJob
	for _, j := range jobs {
		j.perm = unixPerm(j.info.Mode())
		if stage != BlobsAll {
			if d, ok := cache.lookup(j.rel, j.info); ok {
				j.d = d
				cache.keep(j.rel) // not racy then, so not now
				continue
			}
		}
		rest = append(rest, j)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var mu sync.Mutex
	var fatal error
	err := parallel(len(rest), func(i int) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		j := rest[i]
		if stage == BlobsAll {
			if d, ok := cache.lookup(j.rel, j.info); ok {
				if present, err := s.present(d); err == nil && present {
					j.d = d
					cache.record(j.rel, j.info, d, j.seen)
					return nil
				}
			}
		}
		j.d, j.staged, j.err = s.ingestFile(ctx, r, j.rel, stage)
		if j.err == nil {
			j.hashed = true
			cache.record(j.rel, j.info, j.d, j.seen)
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

// ingestFile hashes one file and, when the policy wants its content and
// the store lacks it, stages it. It returns the digest and the staged
// file.
func (s *Store) ingestFile(ctx context.Context, r *os.Root, rel string, stage BlobPolicy) (Digest, string, error) {
	// O_NONBLOCK: a FIFO swapped in since the walk must not hang the open;
	// the fstat below refuses it.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Digest{}, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Digest{}, "", err
	}
	if !fi.Mode().IsRegular() {
		return Digest{}, "", errors.New("skipped: it stopped being a regular file while being read")
	}
	if fi.Size() <= smallFile && stage != BlobsNone {
		data, err := io.ReadAll(io.LimitReader(f, smallFile+1))
		if err != nil {
			return Digest{}, "", err
		}
		if len(data) > smallFile {
			return Digest{}, "", errors.New("skipped: it grew while being read; ingest again")
		}
		d := DigestOf(data)
		if stage == BlobsText && !mergeable(data) {
			return d, "", nil
		}
		if ok, err := s.present(d); err != nil {
			return Digest{}, "", &storeError{err}
		} else if ok {
			return d, "", nil
		}
		tmp, err := s.stageBytes(data)
		if err != nil {
			return Digest{}, "", &storeError{err}
		}
		return d, tmp, nil
	}
	// Hash first and copy only if the store lacks the content.
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return Digest{}, "", err
	}
	d := Digest{Hash: hex.EncodeToString(h.Sum(nil)), Size: n}
	if stage != BlobsAll {
		return d, "", nil // larger than smallFile: never merged as text
	}
	if ok, err := s.present(d); err != nil {
		return Digest{}, "", &storeError{err}
	} else if ok {
		return d, "", nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Digest{}, "", err
	}
	tmp, again, err := s.stageReader(ctx, f)
	if err != nil {
		return Digest{}, "", err
	}
	if again != d {
		os.Remove(tmp)
		return Digest{}, "", errors.New("skipped: it changed while being read; ingest again")
	}
	return d, tmp, nil
}

// mergeable reports whether a three-way merge could use data as text:
// valid UTF-8 without NUL, at most MaxTextMergeSize.
func mergeable(data []byte) bool {
	return len(data) <= MaxTextMergeSize && utf8.Valid(data) && bytes.IndexByte(data, 0) < 0
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
	entries := slices.Clone(n.entries)
	for _, i := range n.files {
		j := jobs[i]
		if j.err == nil {
			entries = append(entries, Entry{Name: j.name, Type: EntryFile, Digest: j.d}.WithPerm(j.perm))
		}
	}
	height := 0
	for _, sub := range n.subdirs {
		d, h, err := s.ingestTrees(ctx, sub, jobs, layers)
		if err != nil {
			return Digest{}, 0, err
		}
		height = max(height, h+1)
		entries = append(entries, Entry{Name: path.Base(sub.rel), Type: EntryDir, Digest: d}.WithPerm(unixPerm(sub.info.Mode())))
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

// Temporary names rex gives what it writes beside the files it manages:
// the prefix, the writer's pid, a dash and hex: its machine's tag
// (hostTag) and random digits. Older names have no tag.
const (
	tmpPrefix   = ".rex-tmp-"
	stagePrefix = ".rex-stage-"
	oldPrefix   = ".rex-old-"
)

// tempName is a fresh temporary name with prefix for this process.
func (s *Store) tempName(prefix string) string {
	return fmt.Sprintf("%s%d-%s%s", prefix, os.Getpid(), s.host, randomSuffix())
}

// hostTag names this machine in temporary names: 8 hex digits of a hash
// of its host name. A directory other machines share (an NFS home, a
// volume of several containers) holds their writers' temporaries too,
// whose pids mean nothing here.
func hostTag() string {
	name, _ := os.Hostname()
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:hostTagLen/2])
}

const hostTagLen = 8

// IsTempName reports whether name is one of the temporary names rex
// gives what it writes beside the files it manages.
func IsTempName(name string) bool {
	_, _, ok := rexTemp(name)
	return ok
}

// leftover reports whether the temporary name of a writer with pid on
// machine host is a leftover this machine may remove: its writer ran
// here and runs no more. Another machine's are left to it.
func (s *Store) leftover(pid int, host string) bool {
	return (host == "" || host == s.host) && !processAlive(pid)
}

// rexTemp reports whether name is one of rex's temporary names, the pid
// of the process that made it, and its machine's tag ("" in older names).
func rexTemp(name string) (pid int, host string, ok bool) {
	for _, p := range []string{tmpPrefix, stagePrefix, oldPrefix} {
		rest, ok := cutPrefix(name, p)
		if !ok {
			continue
		}
		i := 0
		for ; i < len(rest) && rest[i] >= '0' && rest[i] <= '9' && i < 10; i++ {
			pid = pid*10 + int(rest[i]-'0')
		}
		if i == 0 || i >= len(rest) || rest[i] != '-' || len(rest) == i+1 {
			return 0, "", false
		}
		tail := rest[i+1:]
		for _, c := range tail {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return 0, "", false
			}
		}
		if len(tail) == hostTagLen+2*randomBytes {
			host = tail[:hostTagLen]
		}
		return pid, host, true
	}
	return 0, "", false
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// processAlive reports whether a process with that pid runs on this
// machine (one of another user counts: it may be a rexd under sudo). A
// zombie does not: a killed rexd whose parent (an sshd, perhaps niced and
// starved on a busy host) has not reaped it yet writes nothing more.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// zombie says whether /proc shows pid as a zombie ("pid (comm) Z ...";
// comm may hold ')', so the state follows the last one). Without /proc
// nothing is known and it says no.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+1] == ' ' && b[i+2] == 'Z'
}
