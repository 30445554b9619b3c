package cas

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofrs/flock"
)

// ErrRefConflict is returned (wrapped in a *RefConflictError) when a ref
// moved since the caller read it.
var ErrRefConflict = errors.New("ref changed concurrently")

// Limits on ref keys.
const (
	MaxRefTargetLen = 255
	MaxRefPathLen   = 4096
)

// RefKey names a ref: a target (device name), a path on it and, for the
// sync record of a local directory, that directory (a pull into another
// local directory has its own base).
type RefKey struct {
	Target string
	Path   string
	Local  string // may be empty
}

func (k RefKey) validate() error {
	check := func(what, v string, max int) error {
		switch {
		case v == "":
			return fmt.Errorf("ref %s is empty; name it", what)
		case len(v) > max:
			return fmt.Errorf("ref %s is longer than %d bytes; shorten it", what, max)
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			return fmt.Errorf("ref %s %q is not valid UTF-8 text without NUL; rename it", what, clip(v))
		}
		return nil
	}
	if err := check("target", k.Target, MaxRefTargetLen); err != nil {
		return err
	}
	if k.Local != "" {
		if err := check("local path", k.Local, MaxRefPathLen); err != nil {
			return err
		}
	}
	return check("path", k.Path, MaxRefPathLen)
}

// id is the ref's file name: the hash of its canonical key, so any target
// and path map to a safe, fixed-length name.
func (k RefKey) id() string {
	key := []any{k.Target, k.Path}
	if k.Local != "" {
		key = append(key, k.Local)
	}
	b, _ := MarshalCanonical(key) // valid UTF-8 was checked
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Ref points at a snapshot. Revision counts its updates; 0 means the ref
// does not exist yet.
type Ref struct {
	Key      RefKey
	Snapshot Digest
	Revision int64
}

// RefConflictError reports a lost compare-and-swap. It matches
// ErrRefConflict.
type RefConflictError struct {
	Key      RefKey
	Expected int64 // the revision the caller based its update on
	Actual   int64 // the ref's revision now
}

func (e *RefConflictError) Error() string {
	return fmt.Sprintf("ref %s:%s is at revision %d, not %d: someone updated it meanwhile; read it again and retry", e.Key.Target, e.Key.Path, e.Actual, e.Expected)
}

func (e *RefConflictError) Is(target error) bool { return target == ErrRefConflict }

func (s *Store) refFile(k RefKey) string { return filepath.Join(s.refs, k.id()+".ref") }

// ReadRef returns the ref named by key; a ref that does not exist yet is
// returned with Revision 0 and a zero Snapshot.
func (s *Store) ReadRef(key RefKey) (Ref, error) {
	if err := key.validate(); err != nil {
		return Ref{}, err
	}
	data, err := os.ReadFile(s.refFile(key))
	if errors.Is(err, fs.ErrNotExist) {
		return Ref{Key: key}, nil
	}
	if err != nil {
		return Ref{}, fmt.Errorf("read ref %s:%s: %w", key.Target, key.Path, err)
	}
	r, err := decodeRef(data)
	if err != nil {
		return Ref{}, fmt.Errorf("read ref %s:%s: %w; delete %s to start the ref afresh", key.Target, key.Path, err, s.refFile(key))
	}
	if r.Key != key {
		return Ref{}, fmt.Errorf("read ref %s:%s: the file holds the ref of %s:%s; delete %s to start the ref afresh", key.Target, key.Path, r.Key.Target, r.Key.Path, s.refFile(key))
	}
	return r, nil
}

func (r Ref) encode() ([]byte, error) {
	m := map[string]any{
		"kind":     "ref",
		"target":   r.Key.Target,
		"path":     r.Key.Path,
		"snapshot": digestJSON(r.Snapshot),
		"revision": r.Revision,
	}
	if r.Key.Local != "" {
		m["local"] = r.Key.Local
	}
	return MarshalCanonical(m)
}

func decodeRef(data []byte) (Ref, error) {
	const what = "ref"
	v, err := UnmarshalCanonical(data)
	if err != nil {
		return Ref{}, err
	}
	f, err := asFields(v, what)
	if err != nil {
		return Ref{}, err
	}
	if err := f.only(what, "kind", "local", "path", "revision", "snapshot", "target"); err != nil {
		return Ref{}, err
	}
	if k, err := f.str(what, "kind"); err != nil || k != "ref" {
		return Ref{}, fmt.Errorf("%w: kind is not \"ref\"", ErrNotCanonical)
	}
	var r Ref
	if r.Key.Target, err = f.str(what, "target"); err != nil {
		return Ref{}, err
	}
	if r.Key.Path, err = f.str(what, "path"); err != nil {
		return Ref{}, err
	}
	if _, ok := f["local"]; ok {
		if r.Key.Local, err = f.str(what, "local"); err != nil || r.Key.Local == "" {
			return Ref{}, fmt.Errorf("%w: ref field \"local\" must be a non-empty string", ErrNotCanonical)
		}
	}
	if r.Revision, err = f.integer(what, "revision"); err != nil {
		return Ref{}, err
	}
	if r.Revision < 1 {
		return Ref{}, fmt.Errorf("%w: revision %d", ErrNotCanonical, r.Revision)
	}
	if r.Snapshot, err = f.digest(what, "snapshot"); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// UpdateRef moves the ref key to snapshot if, and only if, it is still at
// revision oldRev (0: the ref must not exist yet). It returns the ref at
// its new revision oldRev+1, or a *RefConflictError if the ref moved. The
// check and the write happen under an inter-process file lock, and the new
// ref is written to a uniquely named temporary file, fsynced and renamed,
// so of any number of concurrent updates from one revision exactly one
// wins. The snapshot must be in the store.
func (s *Store) UpdateRef(ctx context.Context, key RefKey, oldRev int64, snapshot Digest) (Ref, error) {
	if err := key.validate(); err != nil {
		return Ref{}, err
	}
	if oldRev < 0 {
		return Ref{}, fmt.Errorf("update ref %s:%s: revision %d is negative; pass the revision you read", key.Target, key.Path, oldRev)
	}
	if _, err := s.ReadSnapshot(snapshot); err != nil {
		return Ref{}, fmt.Errorf("update ref %s:%s: %w", key.Target, key.Path, err)
	}

	lock := flock.New(filepath.Join(s.refs, key.id()+".lock"))
	ok, err := lock.TryLockContext(ctx, 5*time.Millisecond)
	if err == nil && !ok {
		err = ctx.Err()
	}
	if err != nil {
		return Ref{}, fmt.Errorf("update ref %s:%s: lock %s: %w", key.Target, key.Path, lock.Path(), err)
	}
	defer lock.Unlock()

	cur, err := s.ReadRef(key)
	if err != nil {
		return Ref{}, err
	}
	if cur.Revision != oldRev {
		return Ref{}, &RefConflictError{Key: key, Expected: oldRev, Actual: cur.Revision}
	}
	next := Ref{Key: key, Snapshot: snapshot, Revision: oldRev + 1}
	data, err := next.encode()
	if err != nil {
		return Ref{}, err
	}
	if err := s.replaceFile(s.refFile(key), data); err != nil {
		return Ref{}, fmt.Errorf("update ref %s:%s: %w", key.Target, key.Path, err)
	}
	return next, nil
}

// replaceFile writes data to a unique temporary file beside dst, fsyncs,
// renames it over dst and fsyncs the directory.
func (s *Store) replaceFile(dst string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".tmp-*")
	if err != nil {
		return err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, dst)
	}
	if err != nil {
		os.Remove(name)
		return err
	}
	return syncDir(filepath.Dir(dst))
}
