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
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

//go:embed rexd
var embedded embed.FS

// Binary is one rexd build.
type Binary struct {
	GOOS, GOARCH string
	Data         []byte // the executable, uncompressed
	SHA256       string // hex of Data: rexd's build hash
}

// Platform is "goos/goarch".
func (b Binary) Platform() string { return b.GOOS + "/" + b.GOARCH }

// Source finds the rexd build for a platform.
type Source interface {
	Rexd(goos, goarch string) (Binary, error)
	// Platforms lists what the source can provide, for error messages.
	Platforms() []string
}

// ErrUnsupported is wrapped by errors for a platform without a build.
var ErrUnsupported = errors.New("no rexd build for this platform")

// Embedded returns the builds compiled into this rex binary.
func Embedded() Source { return &fsSource{fsys: embedded, dir: "rexd"} }

// Dir returns builds read from dir, named rexd-<goos>-<goarch> with or
// without a .gz suffix.
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
	name := filepath.ToSlash(filepath.Join(s.dir, "rexd-"+key))
	var data []byte
	if raw, err := fs.ReadFile(s.fsys, name+".gz"); err == nil {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return Binary{}, fmt.Errorf("rexd build for %s/%s is corrupt: %w", goos, goarch, err)
		}
		data, err = io.ReadAll(zr)
		if err != nil {
			return Binary{}, fmt.Errorf("rexd build for %s/%s is corrupt: %w", goos, goarch, err)
		}
	} else if raw, err := fs.ReadFile(s.fsys, name); err == nil {
		data = raw
	} else {
		have := s.platformsLocked()
		if len(have) == 0 {
			return Binary{}, fmt.Errorf("%w: %s/%s (this rex carries no rexd builds; build it with `make build`)", ErrUnsupported, goos, goarch)
		}
		return Binary{}, fmt.Errorf("%w: %s/%s (this rex carries %s)", ErrUnsupported, goos, goarch, strings.Join(have, ", "))
	}
	sum := sha256.Sum256(data)
	b := Binary{GOOS: goos, GOARCH: goarch, Data: data, SHA256: hex.EncodeToString(sum[:])}
	if s.cache == nil {
		s.cache = map[string]Binary{}
	}
	s.cache[key] = b
	return b, nil
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
	sum := sha256.Sum256(data)
	s.b = &Binary{GOOS: goos, GOARCH: goarch, Data: data, SHA256: hex.EncodeToString(sum[:])}
	return *s.b, nil
}

func (s *fileSource) Platforms() []string {
	if _, err := os.Stat(s.path); err != nil {
		return nil
	}
	return []string{s.goos + "/" + s.goarch}
}
