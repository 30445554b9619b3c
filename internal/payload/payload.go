// Package payload provides the rexd binaries that rex copies onto targets:
// the builds embedded by `make build`, or a directory or file given by the
// caller (tests build rexd for the local platform on the fly).
package payload

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed rexd
var embedded embed.FS

// Binary is one rexd build: its identity, known without reading it, and a
// way to read it when it must be copied.
type Binary struct {
	GOOS, GOARCH string
	SHA256       string // hex of the executable: rexd's build hash
	Size         int64  // bytes of the executable

	// read returns the executable's bytes (unchecked); nil for a zero Binary.
	read func() ([]byte, error)
	// readGzip returns the build as stored, gzip-compressed; nil when it
	// is not stored so.
	readGzip func() ([]byte, error)
}

// Gzipped returns the build gzip-compressed as it is stored, for a copy
// that is unpacked where it lands, or nil when it is not stored so. The
// bytes are not checked here: the unpacked copy is, against SHA256.
func (b Binary) Gzipped() ([]byte, error) {
	if b.readGzip == nil {
		return nil, nil
	}
	return b.readGzip()
}

// Platform is "goos/goarch".
func (b Binary) Platform() string { return b.GOOS + "/" + b.GOARCH }

// Bytes reads the executable, decompressing it if need be, and refuses it
// unless its size and SHA-256 are the ones SHA256 and Size promise: a
// manifest that does not match its build is never copied anywhere.
func (b Binary) Bytes() ([]byte, error) {
	if b.read == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, b.Platform())
	}
	data, err := b.read()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != b.SHA256 || int64(len(data)) != b.Size {
		return nil, fmt.Errorf("%w: the rexd build for %s is %d bytes with sha256 %.12s…, but its manifest says %d bytes with %.12s…; rebuild rex with `make build`",
			ErrManifest, b.Platform(), len(data), got, b.Size, b.SHA256)
	}
	return data, nil
}

// Source finds the rexd build for a platform.
type Source interface {
	Rexd(goos, goarch string) (Binary, error)
	// Platforms lists what the source can provide, for error messages.
	Platforms() []string
}

// ErrUnsupported is wrapped by errors for a platform without a build.
var ErrUnsupported = errors.New("no rexd build for this platform")

// ErrManifest is wrapped by errors for a build whose bytes are not the
// ones its manifest names.
var ErrManifest = errors.New("rexd build does not match its manifest")

// Embedded returns the builds compiled into this rex binary.
func Embedded() Source { return &fsSource{fsys: embedded, dir: "rexd"} }

// Dir returns builds read from dir, named rexd-<goos>-<goarch> with or
// without a .gz suffix, each with an optional manifest
// rexd-<goos>-<goarch>.sum ("<sha256 hex> <size>\n", written by `make
// payload`). With a manifest, the build's identity costs one small read and
// the build itself is read only by Binary.Bytes; without one, it is read
// and hashed at once.
func Dir(dir string) Source { return &fsSource{fsys: os.DirFS(dir), dir: "."} }

type fsSource struct {
	fsys fs.FS
	dir  string

	mu    sync.Mutex
	cache map[string]Binary
}

func (s *fsSource) Rexd(goos, goarch string) (Binary, error) {
	key := goos + "-" + goarch
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.cache[key]; ok {
		return b, nil
	}
	name := path.Join(s.dir, "rexd-"+key)
	b := Binary{GOOS: goos, GOARCH: goarch}
	var (
		stored string // the file holding the build
		gz     bool
	)
	if _, err := fs.Stat(s.fsys, name+".gz"); err == nil {
		stored, gz = name+".gz", true
	} else if _, err := fs.Stat(s.fsys, name); err == nil {
		stored = name
	} else {
		have := s.platformsLocked()
		if len(have) == 0 {
			return Binary{}, fmt.Errorf("%w: %s/%s (this rex carries no rexd builds; build it with `make build`)", ErrUnsupported, goos, goarch)
		}
		return Binary{}, fmt.Errorf("%w: %s/%s (this rex carries %s)", ErrUnsupported, goos, goarch, strings.Join(have, ", "))
	}
	fsys := s.fsys
	if gz {
		b.readGzip = func() ([]byte, error) {
			raw, err := fs.ReadFile(fsys, stored)
			if err != nil {
				return nil, fmt.Errorf("read the rexd build for %s/%s: %w", goos, goarch, err)
			}
			return raw, nil
		}
	}
	b.read = func() ([]byte, error) {
		raw, err := fs.ReadFile(fsys, stored)
		if err != nil {
			return nil, fmt.Errorf("read the rexd build for %s/%s: %w", goos, goarch, err)
		}
		if !gz {
			return raw, nil
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("rexd build for %s/%s is corrupt: %w", goos, goarch, err)
		}
		data, err := io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("rexd build for %s/%s is corrupt: %w", goos, goarch, err)
		}
		return data, nil
	}
	if m, err := fs.ReadFile(s.fsys, name+".sum"); err == nil {
		sum, size, err := parseManifest(m)
		if err != nil {
			return Binary{}, fmt.Errorf("%w: %s/%s: %v; rebuild rex with `make build`", ErrManifest, goos, goarch, err)
		}
		b.SHA256, b.Size = sum, size
	} else {
		data, err := b.read()
		if err != nil {
			return Binary{}, err
		}
		b = withData(b, data)
	}
	if s.cache == nil {
		s.cache = map[string]Binary{}
	}
	s.cache[key] = b
	return b, nil
}

// withData is b identified by, and reading, data held in memory.
func withData(b Binary, data []byte) Binary {
	sum := sha256.Sum256(data)
	b.SHA256, b.Size = hex.EncodeToString(sum[:]), int64(len(data))
	b.read = func() ([]byte, error) { return data, nil }
	return b
}

// parseManifest reads "<64 hex digits> <decimal size>\n".
func parseManifest(m []byte) (sum string, size int64, err error) {
	f := strings.Fields(string(m))
	if len(f) != 2 || len(f[0]) != sha256.Size*2 {
		return "", 0, fmt.Errorf("the manifest %q is not \"<sha256> <size>\"", m)
	}
	if _, err := hex.DecodeString(f[0]); err != nil || strings.ToLower(f[0]) != f[0] {
		return "", 0, fmt.Errorf("the manifest's hash %q is not lowercase hex", f[0])
	}
	size, err = strconv.ParseInt(f[1], 10, 64)
	if err != nil || size <= 0 {
		return "", 0, fmt.Errorf("the manifest's size %q is not a positive number", f[1])
	}
	return f[0], size, nil
}

func (s *fsSource) Platforms() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.platformsLocked()
}

func (s *fsSource) platformsLocked() []string {
	ents, _ := fs.ReadDir(s.fsys, s.dir)
	var out []string
	for _, e := range ents {
		n := strings.TrimSuffix(e.Name(), ".gz")
		if strings.Contains(n, ".") {
			continue // a manifest or something else, not a build
		}
		if rest, ok := strings.CutPrefix(n, "rexd-"); ok {
			if goos, goarch, ok := strings.Cut(rest, "-"); ok {
				out = append(out, goos+"/"+goarch)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Chain tries sources in order.
func Chain(sources ...Source) Source { return chain(sources) }

type chain []Source

func (c chain) Rexd(goos, goarch string) (Binary, error) {
	var first error
	for _, s := range c {
		b, err := s.Rexd(goos, goarch)
		if err == nil {
			return b, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%w: %s/%s", ErrUnsupported, goos, goarch)
	}
	return Binary{}, first
}

func (c chain) Platforms() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range c {
		for _, p := range s.Platforms() {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// File is a source of one build read from path, for one platform: a rexd
// beside a development rex, built for the machine it runs on.
func File(goos, goarch, path string) Source {
	return &fileSource{goos: goos, goarch: goarch, path: path}
}

type fileSource struct {
	goos, goarch, path string
	mu                 sync.Mutex
	b                  *Binary
}

func (s *fileSource) Rexd(goos, goarch string) (Binary, error) {
	if goos != s.goos || goarch != s.goarch {
		return Binary{}, fmt.Errorf("%w: %s/%s (only %s/%s is at hand)", ErrUnsupported, goos, goarch, s.goos, s.goarch)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b != nil {
		return *s.b, nil
	}
	data, err := os.ReadFile(s.path)
	if err != nil {
		return Binary{}, fmt.Errorf("%w: %s/%s (%v)", ErrUnsupported, goos, goarch, err)
	}
	b := withData(Binary{GOOS: goos, GOARCH: goarch}, data)
	s.b = &b
	return b, nil
}

func (s *fileSource) Platforms() []string {
	if _, err := os.Stat(s.path); err != nil {
		return nil
	}
	return []string{s.goos + "/" + s.goarch}
}
