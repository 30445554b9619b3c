package cas

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Batch and stream limits. A receiver refuses larger requests; a sender
// (Push, Fetch) splits its work to stay within them. They are sized so one
// request, base64-encoded in one NDJSON line, stays well under the protocol's
// 16 MiB line limit.
const (
	// MaxBatchEntries caps the objects in one PutBatch or Get call.
	MaxBatchEntries = 1024
	// MaxBatchBytes caps the summed object sizes in one PutBatch or Get call.
	MaxBatchBytes = 4 << 20
	// MaxHasDigests caps the digests in one Has call.
	MaxHasDigests = 8192
	// MaxChunkSize caps one ReadChunk / Upload.WriteChunk piece.
	MaxChunkSize = 1 << 20
	// MaxInlineSize is the largest object Push and Fetch send in a batch;
	// larger ones travel through Remote.PutStream / Remote.GetStream.
	MaxInlineSize = 1 << 20
)

// Errors returned (wrapped) by store operations; test with errors.Is.
var (
	ErrNotFound      = errors.New("object not found")
	ErrCorrupt       = errors.New("object corrupt")
	ErrBatchTooLarge = errors.New("batch too large")
	ErrMismatch      = errors.New("content does not match its digest")
)

// Object is one object with its claimed digest, as it travels in batches.
type Object struct {
	Digest Digest
	Data   []byte
}

// MissingError lists objects a Get could not return. It matches ErrNotFound.
type MissingError struct {
	Digests []Digest
}

func (e *MissingError) Error() string {
	if len(e.Digests) == 1 {
		return fmt.Sprintf("object %s is not in the store; send it again before using it", e.Digests[0])
	}
	return fmt.Sprintf("%d objects are not in the store (first %s); send them again before using them", len(e.Digests), e.Digests[0])
}

func (e *MissingError) Is(target error) bool { return target == ErrNotFound }

// CorruptError reports a stored object whose bytes do not match its digest.
// It matches ErrCorrupt.
type CorruptError struct {
	Digest Digest
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("object %s is corrupt (%s); it was moved aside, send it again", e.Digest, e.Reason)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Store is a content-addressed object store rooted at one directory. It is
// safe for concurrent use by goroutines and by processes sharing the root.
type Store struct {
	root       string
	objects    string
	tmp        string
	quarantine string
	refs       string

	loc   *locator
	trees *treeCache
	stats *statMemo
	now   func() time.Time // the clock of the stat caches; tests move it
	// verified is what ReadChunk need not verify again; verifying, when
	// set (tests), runs as it verifies an object whole.
	verified  *verifiedFiles
	verifying func(Digest)

	// scratch, when set, holds what this view stores, in memory: see
	// Scratch.
	scratch *scratchObjects
	// host is this machine's tag in temporary names (hostTag).
	host string
}

// scratchObjects are the objects a Scratch view stored.
type scratchObjects struct {
	mu sync.Mutex
	m  map[Digest][]byte
}

func (x *scratchObjects) get(d Digest) ([]byte, bool) {
	if x == nil {
		return nil, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	data, ok := x.m[d]
	return data, ok
}

// Scratch returns a view of the store that reads what the store holds
// and keeps what it is given in memory, never on disk: a dry run plans
// with it (the trees a pull fetches, the merge it makes) and changes
// nothing. Streamed objects (uploads) are refused by the view: a dry
// run has no use for large blobs.
func (s *Store) Scratch() *Store {
	v := *s
	v.scratch = &scratchObjects{m: map[Digest][]byte{}}
	return &v
}

// Open opens (creating if needed) the store rooted at root, e.g.
// $XDG_CACHE_HOME/rex/cas.
func Open(root string) (*Store, error) {
	if root == "" {
		return nil, errors.New("open store: empty root path; pass the store directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", root, err)
	}
	s := &Store{
		root:       abs,
		objects:    filepath.Join(abs, "objects"),
		tmp:        filepath.Join(abs, "tmp"),
		quarantine: filepath.Join(abs, "quarantine"),
		refs:       filepath.Join(abs, "refs"),
		loc:        &locator{byHash: map[string][]blobLoc{}},
		trees:      &treeCache{},
		stats:      &statMemo{},
		verified:   &verifiedFiles{},
		now:        time.Now,
		host:       hostTag(),
	}
	for _, dir := range []string{s.objects, s.tmp, s.quarantine, s.refs} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open store %s: %w", abs, err)
		}
	}
	s.sweepTemp()
	// The empty tree is every merge's base of last resort; keep it present.
	empty, _ := Tree{}.Encode()
	if _, err := s.Add(empty); err != nil {
		return nil, fmt.Errorf("open store %s: %w", abs, err)
	}
	return s, nil
}

// Root returns the store's root directory.
func (s *Store) Root() string { return s.root }

// roomFor refuses to store n more bytes when that is more than max (0: the
// free space of the store's file system, less 5%).
func (s *Store) roomFor(n, max int64) error {
	if max > 0 {
		if n > max {
			return &SpaceError{Path: s.root, Needed: n, Free: max, Limit: true}
		}
		return nil
	}
	f, err := os.Open(s.root)
	if err != nil {
		return err
	}
	defer f.Close()
	free, err := freeSpace(f)
	if err != nil {
		return nil // not known: the writes themselves will tell
	}
	free -= free / 20
	if n > free {
		return &SpaceError{Path: s.root, Needed: n, Free: free}
	}
	return nil
}

// objectPath is the file of a validated digest: objects/ab/cdef….
func (s *Store) objectPath(d Digest) string {
	return filepath.Join(s.objects, d.Hash[:2], d.Hash[2:])
}

// present reports whether a file of the right size holds d. It does not read
// the content: reads verify, and a corrupt object found then is moved aside.
func (s *Store) present(d Digest) (bool, error) {
	if _, ok := s.scratch.get(d); ok {
		return true, nil
	}
	fi, err := os.Lstat(s.objectPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check object %s: %w", d, err)
	}
	return fi.Mode().IsRegular() && fi.Size() == d.Size, nil
}

// Has returns, in request order and without repeats, the digests the store
// lacks. Every digest is validated first; at most MaxHasDigests are accepted.
func (s *Store) Has(ctx context.Context, digests []Digest) (missing []Digest, err error) {
	if len(digests) > MaxHasDigests {
		return nil, fmt.Errorf("%w: %d digests in one has request; send at most %d", ErrBatchTooLarge, len(digests), MaxHasDigests)
	}
	if err := validateAll(digests); err != nil {
		return nil, fmt.Errorf("has: %w", err)
	}
	seen := make(map[Digest]bool, len(digests))
	for _, d := range digests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if seen[d] {
			continue
		}
		seen[d] = true
		ok, err := s.present(d)
		if err != nil {
			return nil, err
		}
		if !ok {
			missing = append(missing, d)
		}
	}
	return missing, nil
}

// Contains reports whether the store holds d (by name and size; content is
// verified when read).
func (s *Store) Contains(d Digest) (bool, error) {
	if err := d.Validate(); err != nil {
		return false, err
	}
	return s.present(d)
}

// Add stores data and returns its digest.
func (s *Store) Add(data []byte) (Digest, error) {
	d := DigestOf(data)
	if err := s.writeObjects([]Object{{Digest: d, Data: data}}); err != nil {
		return Digest{}, err
	}
	return d, nil
}

// Put stores one object after checking that data matches its digest.
func (s *Store) Put(o Object) error {
	if err := verifyObject(o); err != nil {
		return err
	}
	return s.writeObjects([]Object{o})
}

// PutBatch stores a batch of objects received from a peer. It checks the
// caps (MaxBatchEntries, MaxBatchBytes), every digest, and every object's
// bytes against its digest BEFORE storing anything: one bad entry refuses
// the whole call and stores nothing. The bytes are hashed exactly as
// received, never re-encoded. Objects are then written to temporary files,
// fsynced, and renamed into place only once all are written, so a failure
// while writing also stores nothing; should a rename itself fail, objects
// renamed before it stay (each is valid) and the call fails, to be retried.
func (s *Store) PutBatch(ctx context.Context, objects []Object) error {
	if len(objects) > MaxBatchEntries {
		return fmt.Errorf("put: %w: %d objects; send at most %d per batch", ErrBatchTooLarge, len(objects), MaxBatchEntries)
	}
	var total int64
	for _, o := range objects {
		total += int64(len(o.Data))
	}
	if total > MaxBatchBytes {
		return fmt.Errorf("put: %w: %d bytes; send at most %d bytes per batch and stream larger objects", ErrBatchTooLarge, total, MaxBatchBytes)
	}
	for i, o := range objects {
		if err := verifyObject(o); err != nil {
			return fmt.Errorf("put: entry %d: %w", i, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.writeObjects(objects)
}

// Verify checks an object's bytes against its digest, as received.
func Verify(o Object) error { return verifyObject(o) }

// verifyObject checks data against the claimed digest, as received: no
// re-encoding, so the receiver hashes exactly the bytes it will store.
func verifyObject(o Object) error {
	if err := o.Digest.Validate(); err != nil {
		return err
	}
	if int64(len(o.Data)) != o.Digest.Size {
		return fmt.Errorf("%w: object %s has %d bytes, its digest says %d; the sender must recompute the digest", ErrMismatch, abbrev(o.Digest.Hash), len(o.Data), o.Digest.Size)
	}
	sum := sha256.Sum256(o.Data)
	if hex.EncodeToString(sum[:]) != o.Digest.Hash {
		return fmt.Errorf("%w: bytes of object %s hash to %s; the sender must recompute the digest", ErrMismatch, o.Digest, abbrev(hex.EncodeToString(sum[:])))
	}
	return nil
}

type stagedObject struct {
	d   Digest
	tmp string
}

// writeObjects stores verified objects as one layer (see commitLayers).
func (s *Store) writeObjects(objects []Object) error {
	return s.commitLayers([][]Object{objects})
}

// commitLayers stores objects layer by layer: every object of a layer is
// durable before any object of the next is renamed into place, which is how
// a tree (in a later layer) never outlives a crash that loses its children.
// Within a layer, files are written, fsynced in parallel, renamed, and each
// touched directory is fsynced once. Objects already present are skipped.
func (s *Store) commitLayers(layers [][]Object) error {
	if s.scratch != nil {
		s.scratch.mu.Lock()
		defer s.scratch.mu.Unlock()
		for _, layer := range layers {
			for _, o := range layer {
				s.scratch.m[o.Digest] = o.Data
			}
		}
		return nil
	}
	for _, layer := range layers {
		var staged []stagedObject
		seen := make(map[Digest]bool, len(layer))
		for _, o := range layer {
			if seen[o.Digest] {
				continue
			}
			seen[o.Digest] = true
			ok, err := s.present(o.Digest)
			if err == nil && !ok {
				var tmp string
				if tmp, err = s.stageBytes(o.Data); err == nil {
					staged = append(staged, stagedObject{d: o.Digest, tmp: tmp})
					continue
				}
			}
			if err != nil {
				removeStaged(staged)
				return fmt.Errorf("store object %s: %w", o.Digest, err)
			}
		}
		if err := s.commit(staged); err != nil {
			removeStaged(staged)
			return err
		}
	}
	return nil
}

func removeStaged(staged []stagedObject) {
	for _, st := range staged {
		os.Remove(st.tmp)
	}
}

// newTemp creates a uniquely named file in the store's tmp directory, on
// the same file system as objects/ so the final rename is atomic. The name
// holds this process's pid, so a later sweep knows a leftover of a killed
// process from a file being written.
func (s *Store) newTemp(prefix string) (*os.File, error) {
	return os.CreateTemp(s.tmp, fmt.Sprintf("%s-%d-%s-*", prefix, os.Getpid(), s.host))
}

// staleAge is the age after which a temporary file is removed even when
// the process that wrote it may still run.
const staleAge = time.Hour

// sweepTemp removes temporary files left by processes of this machine
// that were killed (their pid is gone), and any older than staleAge: in
// tmp/, and the temporary files of the stat caches and refs.
func (s *Store) sweepTemp() {
	now := time.Now()
	sweep := func(dir string, match func(name string) (pid int, host string, ok bool)) {
		list, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		for _, de := range list {
			pid, host, ok := match(de.Name())
			if !ok {
				continue
			}
			stale := pid > 0 && s.leftover(pid, host)
			if !stale {
				if fi, err := de.Info(); err == nil && now.Sub(fi.ModTime()) > staleAge {
					stale = true
				}
			}
			if stale {
				os.Remove(filepath.Join(dir, de.Name()))
			}
		}
	}
	sweep(s.tmp, func(name string) (int, string, bool) {
		// obj-PID-HOST-RANDOM, upload-PID-HOST-RANDOM; older names have
		// no HOST, or no pid.
		f := strings.SplitN(name, "-", 4)
		if len(f) < 3 {
			return 0, "", true
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil {
			return 0, "", true
		}
		if len(f) == 4 && len(f[2]) == hostTagLen {
			return pid, f[2], true
		}
		return pid, "", true
	})
	dot := func(prefix string) func(string) (int, string, bool) {
		return func(name string) (int, string, bool) { return 0, "", strings.HasPrefix(name, prefix) }
	}
	sweep(filepath.Join(s.root, "statcache"), dot(".statcache-"))
	sweep(s.refs, dot(".tmp-"))
}

// stageBytes writes data to a new temporary file; commit fsyncs it.
func (s *Store) stageBytes(data []byte) (string, error) {
	f, err := s.newTemp("obj")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(name)
		return "", werr
	}
	return name, nil
}

// syncWorkers bounds parallel fsyncs: concurrent fsyncs share journal
// commits, so they finish far sooner together than one after another.
const syncWorkers = 16

// commit fsyncs staged files, renames them into place and fsyncs the
// directories the renames touched. An existing file at a destination
// (present, or a corrupt leftover) is replaced atomically; its content, if
// valid, was identical.
func (s *Store) commit(staged []stagedObject) error {
	if len(staged) == 0 {
		return nil
	}
	bulk := haveSyncFS && len(staged) >= syncfsThreshold
	if bulk {
		if err := syncFS(s.tmp); err != nil {
			return fmt.Errorf("store objects: %w", err)
		}
	} else if err := syncFiles(staged); err != nil {
		return fmt.Errorf("store objects: %w", err)
	}
	dirs := map[string]bool{}
	newShard := false
	for _, st := range staged {
		shard := filepath.Join(s.objects, st.d.Hash[:2])
		if !dirs[shard] {
			if err := os.Mkdir(shard, 0o700); err == nil {
				newShard = true
			} else if !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("store object %s: %w", st.d, err)
			}
		}
		if err := os.Rename(st.tmp, s.objectPath(st.d)); err != nil {
			return fmt.Errorf("store object %s: %w", st.d, err)
		}
		dirs[shard] = true
	}
	if newShard {
		dirs[s.objects] = true
	}
	if bulk {
		// The renames are durable once the directories are: one syncfs
		// covers them all.
		if err := syncFS(s.objects); err != nil {
			return fmt.Errorf("store objects: %w", err)
		}
		return nil
	}
	return syncDirs(slices.Sorted(maps.Keys(dirs)))
}

// syncFiles fsyncs the staged files, several at a time.
func syncFiles(staged []stagedObject) error {
	return parallel(len(staged), func(i int) error {
		f, err := os.OpenFile(staged[i].tmp, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		serr := f.Sync()
		if cerr := f.Close(); serr == nil {
			serr = cerr
		}
		return serr
	})
}

func syncDirs(dirs []string) error {
	return parallel(len(dirs), func(i int) error {
		if err := syncDir(dirs[i]); err != nil {
			return fmt.Errorf("sync %s: %w", dirs[i], err)
		}
		return nil
	})
}

// parallel runs f(0..n-1) on up to syncWorkers goroutines and returns the
// first error.
func parallel(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(n, syncWorkers) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := f.Sync()
	cerr := f.Close()
	if serr != nil {
		return serr
	}
	return cerr
}

// Read returns the bytes of d after checking their size and hash. A blob
// the store holds only as a file it scanned (see IngestOptions.Blobs) is
// read from there, and verified the same way.
func (s *Store) Read(d Digest) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if data, ok := s.scratch.get(d); ok {
		return data, nil // verified when it was stored
	}
	f, loc, err := s.openChecked(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, d.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, s.bad(d, loc, "short read: "+err.Error())
	}
	if n, _ := f.Read(make([]byte, 1)); n != 0 {
		return nil, s.bad(d, loc, "longer than its size")
	}
	if DigestOf(data) != d {
		return nil, s.bad(d, loc, "hash mismatch")
	}
	return data, nil
}

// readUnchecked returns d's bytes after checking only their size: for
// bytes checked earlier in this process (see VerifiedSet), on their way to
// a receiver that checks them again.
func (s *Store) readUnchecked(d Digest) ([]byte, error) {
	if data, ok := s.scratch.get(d); ok {
		return data, nil
	}
	f, _, err := s.openChecked(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data := make([]byte, d.Size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read object %s: %w", d, err)
	}
	return data, nil
}

// bad reports content that does not match d: a corrupt object is moved
// aside; a located file that changed is forgotten (it is the user's file,
// never moved) and the blob is missing.
func (s *Store) bad(d Digest, loc *blobLoc, reason string) error {
	if loc != nil {
		s.locator().forget(d.Hash, *loc)
		return &MissingError{Digests: []Digest{d}}
	}
	return s.corrupt(d, reason)
}

// openChecked opens the object file, or a located file holding d, and
// checks it is a regular file of the right size. loc is set for a located
// file.
func (s *Store) openChecked(d Digest) (*os.File, *blobLoc, error) {
	f, err := os.Open(s.objectPath(d))
	if errors.Is(err, fs.ErrNotExist) {
		if lf, loc := s.openLocated(d, true); lf != nil {
			return lf, &loc, nil
		}
		return nil, nil, &MissingError{Digests: []Digest{d}}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read object %s: %w", d, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("read object %s: %w", d, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, s.corrupt(d, "not a regular file")
	}
	if fi.Size() != d.Size {
		f.Close()
		return nil, nil, s.corrupt(d, fmt.Sprintf("%d bytes on disk", fi.Size()))
	}
	return f, nil, nil
}

// corrupt moves a bad object aside so Has reports it missing and the next
// sync stores a good copy, and returns the error describing it.
func (s *Store) corrupt(d Digest, reason string) error {
	dst := filepath.Join(s.quarantine, d.Hash+"-"+randomSuffix())
	if err := os.Rename(s.objectPath(d), dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		reason += "; could not move it aside: " + err.Error()
	}
	return &CorruptError{Digest: d, Reason: reason}
}

// randomBytes is the size of randomSuffix's number, in bytes.
const randomBytes = 8

func randomSuffix() string {
	var b [randomBytes]byte
	rand.Read(b[:]) // never fails (crypto/rand documents a fatal error instead)
	return hex.EncodeToString(b[:])
}

// Get returns the objects named by digests, in request order, each verified.
// Any missing object fails the call with a *MissingError listing all of
// them: objects are never silently omitted. The caps are those of PutBatch,
// computed from the sizes the digests claim.
func (s *Store) Get(ctx context.Context, digests []Digest) ([]Object, error) {
	if len(digests) > MaxBatchEntries {
		return nil, fmt.Errorf("get: %w: %d objects; ask for at most %d per batch", ErrBatchTooLarge, len(digests), MaxBatchEntries)
	}
	if err := validateAll(digests); err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	var total int64
	for _, d := range digests {
		total += d.Size
	}
	if total > MaxBatchBytes {
		return nil, fmt.Errorf("get: %w: %d bytes; ask for at most %d bytes per batch and stream larger objects", ErrBatchTooLarge, total, MaxBatchBytes)
	}
	out := make([]Object, 0, len(digests))
	var missing []Digest
	for _, d := range digests {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := s.Read(d)
		var me *MissingError
		switch {
		case errors.As(err, &me):
			missing = append(missing, d)
			continue
		case err != nil:
			return nil, fmt.Errorf("get: %w", err)
		}
		out = append(out, Object{Digest: d, Data: data})
	}
	if len(missing) > 0 {
		return nil, &MissingError{Digests: missing}
	}
	return out, nil
}

// Open returns a reader of d's bytes that verifies them as they stream: it
// fails with a *CorruptError instead of io.EOF when they do not match.
func (s *Store) Open(d Digest) (io.ReadCloser, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if data, ok := s.scratch.get(d); ok {
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	f, loc, err := s.openChecked(d)
	if err != nil {
		return nil, err
	}
	return &verifyingReader{s: s, f: f, loc: loc, d: d, h: sha256.New()}, nil
}

type verifyingReader struct {
	s   *Store
	f   *os.File
	loc *blobLoc
	d   Digest
	h   hash.Hash
	n   int64
	err error
}

func (r *verifyingReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.f.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if r.n > r.d.Size {
		r.err = r.s.bad(r.d, r.loc, "longer than its size")
		return 0, r.err
	}
	if err == io.EOF {
		if r.n != r.d.Size {
			r.err = r.s.bad(r.d, r.loc, "shorter than its size")
			return n, r.err
		}
		if hex.EncodeToString(r.h.Sum(nil)) != r.d.Hash {
			r.err = r.s.bad(r.d, r.loc, "hash mismatch")
			return n, r.err
		}
		r.err = io.EOF
	} else if err != nil {
		r.err = fmt.Errorf("read object %s: %w", r.d, err)
	}
	return n, r.err
}

func (r *verifyingReader) Close() error { return r.f.Close() }

// ReadChunk returns up to n bytes (n <= MaxChunkSize) of d from offset: the
// server side of a streamed download. A request at offset 0 first verifies
// the whole object, so a corrupt object is refused (and moved aside) before
// any of it is sent; the receiver verifies again when it commits its Upload.
func (s *Store) ReadChunk(d Digest, offset int64, n int) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("read chunk: %w", err)
	}
	if n <= 0 || n > MaxChunkSize {
		return nil, fmt.Errorf("read chunk of %s: length %d out of range; ask for 1 to %d bytes", d, n, MaxChunkSize)
	}
	if offset < 0 || offset > d.Size {
		return nil, fmt.Errorf("read chunk of %s: offset %d is outside the object's %d bytes", d, offset, d.Size)
	}
	f, loc, err := s.openChecked(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if offset == 0 {
		if err := s.verifyOnce(f, loc, d); err != nil {
			return nil, err
		}
	}
	if rest := d.Size - offset; int64(n) > rest {
		n = int(rest)
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, offset); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Errorf("read chunk of %s at %d: %w", d, offset, err)
	}
	return buf, nil
}

// verifyOnce verifies the whole of f, opened for d, unless this store
// verified the very same file unchanged before (same inode and device,
// size, modification and change times, all older than the racy window
// when it was verified): a client asking offset 0 again and again (a
// retried or restarted download) costs a stat, not a read of the object.
// Any write to the file moves its change time, which no one can set back.
func (s *Store) verifyOnce(f *os.File, loc *blobLoc, d Digest) error {
	seen := s.now()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read object %s: %w", d, err)
	}
	k, ok := keyOf(fi)
	if ok && s.verified.has(d, k) {
		return nil
	}
	if s.verifying != nil {
		s.verifying(d)
	}
	if _, err := io.Copy(io.Discard, &verifyingReader{s: s, f: f, loc: loc, d: d, h: sha256.New()}); err != nil {
		return err
	}
	if ok && !k.racy(seen) {
		s.verified.add(d, k)
	}
	return nil
}

// verifiedFiles is the files ReadChunk verified whole, by digest: at most
// maxVerified, the oldest forgotten first.
type verifiedFiles struct {
	mu    sync.Mutex
	m     map[Digest]statKey
	order []Digest
}

const maxVerified = 4096

func (v *verifiedFiles) has(d Digest, k statKey) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[d]
	return ok && got == k
}

func (v *verifiedFiles) add(d Digest, k statKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[Digest]statKey{}
	}
	if _, ok := v.m[d]; !ok {
		if len(v.order) >= maxVerified {
			delete(v.m, v.order[0])
			v.order = v.order[1:]
		}
		v.order = append(v.order, d)
	}
	v.m[d] = k
}

// Upload receives one object in sequential pieces (a streamed put) and
// stores it only if the whole matches its digest. It is not safe for
// concurrent use; a daemon keeps one per upload id.
type Upload struct {
	s    *Store
	d    Digest
	f    *os.File
	h    hash.Hash
	off  int64
	done bool
}

// NewUpload starts receiving d. Abort or Commit it to release its file.
func (s *Store) NewUpload(d Digest) (*Upload, error) {
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	if s.scratch != nil {
		return nil, fmt.Errorf("upload %s: a dry run's scratch store keeps no streamed objects", d)
	}
	f, err := s.newTemp("upload")
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", d, err)
	}
	return &Upload{s: s, d: d, f: f, h: sha256.New()}, nil
}

// Digest returns the digest being uploaded.
func (u *Upload) Digest() Digest { return u.d }

// Offset returns how many bytes have been received; the next chunk starts
// there.
func (u *Upload) Offset() int64 { return u.off }

// Write appends p; it refuses bytes beyond the digest's size.
func (u *Upload) Write(p []byte) (int, error) {
	if u.done {
		return 0, fmt.Errorf("upload %s: already finished", u.d)
	}
	if int64(len(p)) > u.d.Size-u.off {
		return 0, fmt.Errorf("upload %s: %w: %d bytes past its size of %d", u.d, ErrMismatch, u.off+int64(len(p))-u.d.Size, u.d.Size)
	}
	n, err := u.f.Write(p)
	u.h.Write(p[:n])
	u.off += int64(n)
	if err != nil {
		return n, fmt.Errorf("upload %s: %w", u.d, err)
	}
	return n, nil
}

// WriteChunk appends p, which must start at Offset(): a retried or
// reordered chunk is refused with the offset the receiver expects.
func (u *Upload) WriteChunk(offset int64, p []byte) error {
	if offset != u.off {
		return fmt.Errorf("upload %s: chunk at offset %d, expected %d; resend from %d", u.d, offset, u.off, u.off)
	}
	if len(p) > MaxChunkSize {
		return fmt.Errorf("upload %s: %w: chunk of %d bytes; send at most %d", u.d, ErrBatchTooLarge, len(p), MaxChunkSize)
	}
	_, err := u.Write(p)
	return err
}

// Commit checks size and hash of everything written and, if they match,
// stores the object durably. The upload is finished either way.
func (u *Upload) Commit() error {
	if u.done {
		return fmt.Errorf("upload %s: already finished", u.d)
	}
	u.done = true
	name := u.f.Name()
	if u.off != u.d.Size {
		u.f.Close()
		os.Remove(name)
		return fmt.Errorf("upload %s: %w: received %d of %d bytes; send the rest before committing", u.d, ErrMismatch, u.off, u.d.Size)
	}
	if got := hex.EncodeToString(u.h.Sum(nil)); got != u.d.Hash {
		u.f.Close()
		os.Remove(name)
		return fmt.Errorf("upload %s: %w: received bytes hash to %s; upload it again", u.d, ErrMismatch, abbrev(got))
	}
	err := u.f.Sync()
	if cerr := u.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = u.s.commit([]stagedObject{{d: u.d, tmp: name}})
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("upload %s: %w", u.d, err)
	}
	return nil
}

// Abort discards the upload.
func (u *Upload) Abort() error {
	if u.done {
		return nil
	}
	u.done = true
	u.f.Close()
	return os.Remove(u.f.Name())
}

// PutStream stores d from r, verifying it as a whole; it is the reader
// form of Upload for in-process use.
func (s *Store) PutStream(ctx context.Context, d Digest, r io.Reader) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("put stream: %w", err)
	}
	if ok, err := s.present(d); err != nil || ok {
		// Drain nothing: the caller owns r. A present object needs no bytes.
		return err
	}
	u, err := s.NewUpload(d)
	if err != nil {
		return err
	}
	// Read one byte past the size so an over-long stream is caught.
	if _, err := io.Copy(u, ctxReader{ctx, io.LimitReader(r, d.Size+1)}); err != nil {
		u.Abort()
		return err
	}
	return u.Commit()
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// EncodeBase64 encodes object bytes for the wire (standard alphabet, padded).
func EncodeBase64(data []byte) string { return base64.StdEncoding.EncodeToString(data) }

// DecodeBase64 decodes wire bytes strictly: standard alphabet, correct
// padding, no whitespace or line breaks, zero pad bits.
func DecodeBase64(s string) ([]byte, error) {
	// The standard decoder skips \r and \n even in strict mode.
	if i := bytes.IndexAny([]byte(s), "\r\n"); i >= 0 {
		return nil, fmt.Errorf("decode base64: line break at byte %d; send unwrapped standard base64", i)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("decode base64: %w; send unwrapped, padded standard base64", err)
	}
	return b, nil
}
