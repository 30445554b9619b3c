// Package secrets keeps the operator's secrets (tokens, passwords) and
// masks their values in output.
//
// A secret is a name and a value. Tools and devices declare the names they
// need; rex gives each process the values as environment variables and
// nothing else: never an argument, a file on the target, a trace, an audit
// entry or a prompt. Values are stored, in order of preference:
//
//   - in the OS keyring (the freedesktop Secret Service on Linux, the
//     Keychain on macOS) through github.com/zalando/go-keyring, when one
//     answers: the desktop already protects it with the login session;
//   - otherwise in $XDG_CONFIG_HOME/rex/secrets.age, a file encrypted with
//     age (filippo.io/age) under a passphrase (scrypt). A plaintext 0600
//     file was the other choice; it was refused because rex promises that
//     secrets never reach the disk in the clear, and because a copied
//     dotfiles directory or backup would carry them. The passphrase comes
//     from REX_SECRETS_PASSPHRASE or is asked on the terminal, once per rex
//     process.
//
// Once a secrets.age file exists it stays the store (so secrets do not
// seem to vanish when a keyring appears later); REX_SECRETS_BACKEND=keyring
// or =file forces one.
package secrets

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"filippo.io/age"
	"github.com/gofrs/flock"
	"github.com/zalando/go-keyring"
)

// PassphraseEnv names the variable that unlocks the encrypted secrets
// file without a prompt (scripts, CI, the console). It opens every secret
// rex keeps, so no process rex starts inherits it.
const PassphraseEnv = "REX_SECRETS_PASSPHRASE"

// Environ is this process's environment without PassphraseEnv: the
// environment of every process rex starts on this machine (a local rexd,
// sudo, a syntax checker), none of which may open the secrets file.
func Environ() []string {
	env := os.Environ()
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != PassphraseEnv {
			out = append(out, kv)
		}
	}
	return out
}

// BackendEnv forces the secrets backend: keyring or file.
const BackendEnv = "REX_SECRETS_BACKEND"

// ErrNotFound is a name the store does not hold.
var ErrNotFound = errors.New("secret not found")

// Store keeps secrets by name.
type Store interface {
	Get(name string) (string, error)
	Set(name, value string) error
	// Delete removes name; ErrNotFound when it was not there.
	Delete(name string) error
	// List returns the names, sorted.
	List() ([]string, error)
	// Where says where the values live, for people.
	Where() string
}

// Backends.
const (
	BackendKeyring = "keyring"
	BackendFile    = "file"
)

// FileName is the encrypted store under the config directory.
const FileName = "secrets.age"

// Options configure Open.
type Options struct {
	// Dir is $XDG_CONFIG_HOME/rex, where secrets.age lives.
	Dir string
	// Backend is "", BackendKeyring or BackendFile ("" chooses).
	Backend string
	// Passphrase returns the file store's passphrase; confirm is true when
	// the file is being created (ask twice). Called at most once per Store.
	Passphrase func(confirm bool) (string, error)
	// Keyring is the keyring to use; nil means the OS keyring.
	Keyring Keyring
	// workFactor is the scrypt work factor (log2) of files this store
	// writes; 0 is age's default (18). Only this package's tests lower it.
	workFactor int
}

// Keyring is the part of go-keyring rex uses.
type Keyring interface {
	Get(service, user string) (string, error)
	Set(service, user, password string) error
	Delete(service, user string) error
}

type osKeyring struct{}

func (osKeyring) Get(s, u string) (string, error) { return keyring.Get(s, u) }
func (osKeyring) Set(s, u, p string) error        { return keyring.Set(s, u, p) }
func (osKeyring) Delete(s, u string) error        { return keyring.Delete(s, u) }

// service is the keyring service every secret is filed under; indexUser
// holds the list of names (keyrings cannot list), and cannot collide with
// a secret, whose names have no ':'.
const (
	service   = "rex"
	indexUser = "rex:index"
)

// Open returns the store Options choose.
func Open(opts Options) (Store, error) {
	kr := opts.Keyring
	if kr == nil {
		kr = osKeyring{}
	}
	file := filepath.Join(opts.Dir, FileName)
	switch opts.Backend {
	case BackendKeyring:
		if err := probe(kr); err != nil {
			return nil, fmt.Errorf("%s=keyring, but no OS keyring answers (%v); unset it to use the encrypted file", BackendEnv, err)
		}
		return &keyringStore{kr: kr}, nil
	case BackendFile:
		return newFileStore(file, opts.Passphrase, opts.workFactor), nil
	case "":
	default:
		return nil, fmt.Errorf("%s=%s is not a backend; use keyring or file", BackendEnv, opts.Backend)
	}
	if _, err := os.Lstat(file); err == nil {
		return newFileStore(file, opts.Passphrase, opts.workFactor), nil
	}
	if probe(kr) == nil {
		return &keyringStore{kr: kr}, nil
	}
	return newFileStore(file, opts.Passphrase, opts.workFactor), nil
}

// probe reports whether the keyring answers.
func probe(kr Keyring) error {
	_, err := kr.Get(service, indexUser)
	if err == nil || errors.Is(err, keyring.ErrNotFound) {
		return nil
	}
	return err
}

// keyringStore keeps each value as one keyring item and the names in
// another.
type keyringStore struct {
	kr Keyring
	mu sync.Mutex
}

func (s *keyringStore) Where() string { return "the OS keyring (service \"rex\")" }

func (s *keyringStore) Get(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	v, err := s.kr.Get(service, name)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", name, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read %s from the OS keyring: %w", name, err)
	}
	return v, nil
}

func (s *keyringStore) index() ([]string, error) {
	v, err := s.kr.Get(service, indexUser)
	if errors.Is(err, keyring.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the list of secrets from the OS keyring: %w", err)
	}
	var names []string
	if err := json.Unmarshal([]byte(v), &names); err != nil {
		return nil, fmt.Errorf("the list of secrets in the OS keyring is damaged (%v); delete the item %q of service %q", err, indexUser, service)
	}
	return names, nil
}

func (s *keyringStore) setIndex(names []string) error {
	sort.Strings(names)
	b, _ := json.Marshal(names)
	if err := s.kr.Set(service, indexUser, string(b)); err != nil {
		return fmt.Errorf("update the list of secrets in the OS keyring: %w", err)
	}
	return nil
}

func (s *keyringStore) Set(name, value string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := CheckValue(name, value); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.kr.Set(service, name, value); err != nil {
		return fmt.Errorf("store %s in the OS keyring: %w", name, err)
	}
	names, err := s.index()
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == name {
			return nil
		}
	}
	return s.setIndex(append(names, name))
}

func (s *keyringStore) Delete(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.kr.Delete(service, name)
	if errors.Is(err, keyring.ErrNotFound) {
		err = fmt.Errorf("%s: %w", name, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("delete %s from the OS keyring: %w", name, err)
	}
	names, ierr := s.index()
	if ierr != nil {
		return ierr
	}
	keep := names[:0]
	for _, n := range names {
		if n != name {
			keep = append(keep, n)
		}
	}
	if len(keep) != len(names) {
		if ierr := s.setIndex(keep); ierr != nil {
			return ierr
		}
	}
	return err
}

func (s *keyringStore) List() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.index()
	sort.Strings(names)
	return names, err
}

// maxValueBytes bounds a secret's value; environment variables are small.
const maxValueBytes = 64 << 10

// CheckValue reports whether value can be a secret's value.
func CheckValue(name, value string) error {
	switch {
	case value == "":
		return fmt.Errorf("the value of %s is empty; nothing was stored", name)
	case len(value) > maxValueBytes:
		return fmt.Errorf("the value of %s is larger than %d KiB; an environment variable cannot carry it", name, maxValueBytes>>10)
	case strings.IndexByte(value, 0) >= 0:
		return fmt.Errorf("the value of %s holds a NUL byte, which an environment variable cannot carry", name)
	}
	return nil
}

// fileStore keeps every secret in one age-encrypted JSON object.
type fileStore struct {
	path string
	ask  func(confirm bool) (string, error)
	work int // scrypt work factor; 0 is age's default

	mu   sync.Mutex
	pass string // once asked
	// cache is the last decrypted content and the file it came from, so a
	// run that needs several secrets decrypts once.
	cache map[string]string
	stamp string
}

func newFileStore(path string, ask func(bool) (string, error), work int) *fileStore {
	return &fileStore{path: path, ask: ask, work: work}
}

func (s *fileStore) Where() string { return "the encrypted file " + s.path }

// passphrase asks once.
func (s *fileStore) passphrase(confirm bool) (string, error) {
	if s.pass != "" {
		return s.pass, nil
	}
	if s.ask == nil {
		return "", fmt.Errorf("the secrets in %s are locked: set %s, or run rex in a terminal to type the passphrase", s.path, PassphraseEnv)
	}
	p, err := s.ask(confirm)
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", fmt.Errorf("the passphrase for %s is empty; nothing was read or written", s.path)
	}
	s.pass = p
	return p, nil
}

// load decrypts the file; a missing file is an empty store.
func (s *fileStore) load() (map[string]string, bool, error) {
	fi, err := os.Stat(s.path)
	if err == nil && s.cache != nil && s.stamp == stampOf(fi) {
		m := make(map[string]string, len(s.cache))
		for k, v := range s.cache {
			m[k] = v
		}
		return m, true, nil
	}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", s.path, err)
	}
	pass, err := s.passphrase(false)
	if err != nil {
		return nil, true, err
	}
	id, err := age.NewScryptIdentity(pass)
	if err != nil {
		return nil, true, err
	}
	r, err := age.Decrypt(bytes.NewReader(b), id)
	if err != nil {
		s.pass = ""
		var nm *age.NoIdentityMatchError
		if errors.As(err, &nm) {
			return nil, true, fmt.Errorf("the passphrase does not open %s; nothing was read or changed", s.path)
		}
		return nil, true, fmt.Errorf("%s cannot be decrypted (%v); it is damaged or not a rex secrets file", s.path, err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, true, fmt.Errorf("%s cannot be decrypted (%v); it is damaged", s.path, err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(plain, &m); err != nil {
		return nil, true, fmt.Errorf("%s decrypts but does not hold rex secrets (%v)", s.path, err)
	}
	if fi != nil {
		s.cache, s.stamp = m, stampOf(fi)
		m = make(map[string]string, len(s.cache))
		for k, v := range s.cache {
			m[k] = v
		}
	}
	return m, true, nil
}

func stampOf(fi os.FileInfo) string {
	return fmt.Sprintf("%d/%d", fi.ModTime().UnixNano(), fi.Size())
}

// save encrypts m and replaces the file atomically (0600, fsynced).
func (s *fileStore) save(m map[string]string, existed bool) error {
	pass, err := s.passphrase(!existed)
	if err != nil {
		return err
	}
	rcpt, err := age.NewScryptRecipient(pass)
	if err != nil {
		return err
	}
	if s.work > 0 {
		rcpt.SetWorkFactor(s.work)
	}
	plain, err := json.Marshal(m)
	if err != nil {
		return err
	}
	var enc bytes.Buffer
	w, err := age.Encrypt(&enc, rcpt)
	if err != nil {
		return err
	}
	if _, err := w.Write(plain); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	dir := filepath.Dir(s.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".secrets-*.age")
	if err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(enc.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", s.path, err)
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("replace %s: %w", s.path, err)
	}
	s.cache = nil
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// locked runs fn under the file's lock, so two rex processes setting
// secrets at once both land.
func (s *fileStore) locked(fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return err
	}
	l := flock.New(s.path + ".lock")
	if err := l.Lock(); err != nil {
		return fmt.Errorf("lock %s: %w", s.path, err)
	}
	defer l.Unlock()
	return fn()
}

func (s *fileStore) Get(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	var v string
	err := s.locked(func() error {
		m, _, err := s.load()
		if err != nil {
			return err
		}
		var ok bool
		if v, ok = m[name]; !ok {
			return fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		return nil
	})
	return v, err
}

func (s *fileStore) Set(name, value string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := CheckValue(name, value); err != nil {
		return err
	}
	return s.locked(func() error {
		m, existed, err := s.load()
		if err != nil {
			return err
		}
		m[name] = value
		return s.save(m, existed)
	})
}

func (s *fileStore) Delete(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	return s.locked(func() error {
		m, existed, err := s.load()
		if err != nil {
			return err
		}
		if _, ok := m[name]; !ok {
			return fmt.Errorf("%s: %w", name, ErrNotFound)
		}
		delete(m, name)
		return s.save(m, existed)
	})
}

func (s *fileStore) List() ([]string, error) {
	var names []string
	err := s.locked(func() error {
		m, _, err := s.load()
		if err != nil {
			return err
		}
		for n := range m {
			names = append(names, n)
		}
		return nil
	})
	sort.Strings(names)
	return names, err
}
