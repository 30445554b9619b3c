package devices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/adrg/xdg"
	"github.com/gofrs/flock"
)

// FileName is the registry's file name inside rex's config directory.
const FileName = "devices.json"

// maxFileSize bounds what Load reads; a registry is a few kilobytes.
const maxFileSize = 16 << 20

// DefaultPath returns $XDG_CONFIG_HOME/rex/devices.json, by default
// ~/.config/rex/devices.json. The xdg package reads the environment once,
// at start-up; the path is computed from the environment at call time
// with the same rule (an XDG_CONFIG_HOME that is not absolute is ignored,
// as the XDG spec says) so that a changed environment is honoured. xdg's
// own answer is the fallback when neither variable helps.
func DefaultPath() (string, error) {
	return pathFromEnv(os.Getenv)
}

func pathFromEnv(getenv func(string) string) (string, error) {
	home := getenv("HOME")
	expand := func(p string) string {
		if home != "" && (p == "~" || len(p) > 1 && p[0] == '~' && p[1] == '/') {
			return filepath.Join(home, p[1:])
		}
		return p
	}
	if dir := expand(getenv("XDG_CONFIG_HOME")); dir != "" && filepath.IsAbs(dir) {
		return filepath.Join(dir, "rex", FileName), nil
	}
	if home != "" && filepath.IsAbs(home) {
		return filepath.Join(home, ".config", "rex", FileName), nil
	}
	// Without HOME, xdg falls back to "/" on Unix; "/.config" is no place
	// for a user's registry, while other platforms' answers are.
	if xdg.ConfigHome != "" && filepath.IsAbs(xdg.ConfigHome) && xdg.ConfigHome != "/.config" {
		return filepath.Join(xdg.ConfigHome, "rex", FileName), nil
	}
	return "", errors.New("cannot locate devices.json because neither XDG_CONFIG_HOME nor HOME is set; set one of them")
}

// Store is the devices.json file at one path. It holds no open files; every
// Load reads the file afresh and every Update locks, reads, changes and
// atomically replaces it.
type Store struct {
	path        string
	lockTimeout time.Duration
	// step, when set, is called after each stage of a save; tests use it
	// to kill the process at every point of the sequence.
	step func(stage string)
}

// NewStore returns the store for the registry file at path. Nothing is
// read or created until Load or Update.
func NewStore(path string) *Store {
	return &Store{path: path, lockTimeout: 10 * time.Second}
}

// OpenDefault returns the store at DefaultPath.
func OpenDefault() (*Store, error) {
	p, err := DefaultPath()
	if err != nil {
		return nil, err
	}
	return NewStore(p), nil
}

// Path is the registry file's path.
func (s *Store) Path() string { return s.path }

// LockPath is the lock file every writer holds: the registry file's path
// plus ".lock", in the same directory. A symlinked registry (dotfiles) is
// locked beside the file the link points to, so that every path to one
// registry takes the same lock.
func (s *Store) LockPath() string {
	target, err := followLinks(s.path)
	if err != nil {
		target = s.path
	}
	return target + ".lock"
}

// Load reads a snapshot of the registry. A missing file is an empty
// registry. Readers take no lock: saves replace the file by rename, so a
// reader sees either the old or the new file, never a mix.
func (s *Store) Load() (*Registry, error) {
	return s.load()
}

func (s *Store) load() (*Registry, error) {
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return New(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("read device registry: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read device registry %s: %w", s.path, err)
	}
	if n > maxFileSize {
		return nil, fmt.Errorf("read device registry %s: the file is larger than %d MiB; it is not a registry rex wrote, check the path", s.path, maxFileSize>>20)
	}
	data := buf.Bytes()
	r, err := Parse(data)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			fe.Path = s.path
		}
		return nil, err
	}
	return r, nil
}

// Update changes the registry under the inter-process lock: it reads the
// file, calls fn on the snapshot and, if fn succeeds and changed anything,
// replaces the file atomically. If the file does not parse, fn is not
// called and nothing is written. The lock is waited for until ctx ends or
// ten seconds pass.
func (s *Store) Update(ctx context.Context, fn func(*Registry) error) error {
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create registry directory: %w", err)
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	r, err := s.load()
	if err != nil {
		return err
	}
	before, err := r.Bytes()
	if err != nil {
		return err
	}
	if err := fn(r); err != nil {
		return err
	}
	after, err := r.Bytes()
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) {
		return nil // nothing changed: leave the file, and its formatting, alone
	}
	if err := s.write(after); err != nil {
		return fmt.Errorf("save device registry %s: %w", s.path, err)
	}
	return nil
}

func (s *Store) lock(ctx context.Context) (unlock func(), err error) {
	target, err := followLinks(s.path)
	if err != nil {
		return nil, err
	}
	// A link may point into a directory that does not exist yet; the save
	// creates it, and the lock lives there.
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return nil, fmt.Errorf("create registry directory: %w", err)
	}
	lockPath := target + ".lock"
	lctx, cancel := context.WithTimeout(ctx, s.lockTimeout)
	defer cancel()
	l := flock.New(lockPath, flock.SetPermissions(0o600))
	ok, err := l.TryLockContext(lctx, 5*time.Millisecond)
	if err == nil && !ok {
		err = lctx.Err()
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("lock %s: another rex process has been editing the registry for %s; try again when it has finished", lockPath, s.lockTimeout)
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	return func() { _ = l.Unlock() }, nil
}

func (s *Store) stage(name string) {
	if s.step != nil {
		s.step(name)
	}
}

// write replaces the registry file with data: a temporary file in the same
// directory, written and fsynced, renamed over the target, and the
// directory fsynced so the rename itself is durable. A symlinked registry
// (dotfiles) is written through: its target is replaced, not the link.
// Must be called with the lock held.
func (s *Store) write(data []byte) error {
	target, err := followLinks(s.path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// Under the lock, any temporary file left here belongs to a process
	// that died mid-save; it holds nothing the registry needs.
	if stale, _ := filepath.Glob(filepath.Join(dir, "."+base+".*.tmp")); len(stale) > 0 {
		for _, f := range stale {
			_ = os.Remove(f)
		}
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	s.stage("create")
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	half := len(data) / 2
	if _, err := f.Write(data[:half]); err != nil {
		return err
	}
	s.stage("write-half")
	if _, err := f.Write(data[half:]); err != nil {
		return err
	}
	s.stage("write")
	if err := f.Sync(); err != nil {
		return err
	}
	s.stage("sync")
	if err := f.Close(); err != nil {
		return err
	}
	s.stage("close")
	if err := os.Rename(tmp, target); err != nil {
		return err
	}
	ok = true
	s.stage("rename")
	if err := syncDir(dir); err != nil {
		return err
	}
	s.stage("sync-dir")
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	err = d.Sync()
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		// Some file systems cannot sync a directory; the rename is done
		// and is as durable as they allow.
		return nil
	}
	return err
}

// followLinks resolves symlinks at path, even a dangling one, so that a save
// replaces the file the link points to.
func followLinks(path string) (string, error) {
	for range 40 {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}
