package payload

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func writeGz(t *testing.T, path string, data []byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDirReadsCompressedAndPlainBuilds(t *testing.T) {
	dir := t.TempDir()
	amd := []byte("#!fake rexd amd64")
	arm := []byte("#!fake rexd arm64")
	writeGz(t, filepath.Join(dir, "rexd-linux-amd64.gz"), amd)
	os.WriteFile(filepath.Join(dir, "rexd-linux-arm64"), arm, 0o755)
	src := Dir(dir)
	for _, tt := range []struct {
		arch string
		want []byte
	}{{"amd64", amd}, {"arm64", arm}} {
		b, err := src.Rexd("linux", tt.arch)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(tt.want)
		if !bytes.Equal(b.Data, tt.want) || b.SHA256 != hex.EncodeToString(sum[:]) || b.Platform() != "linux/"+tt.arch {
			t.Errorf("%s: %+v", tt.arch, b)
		}
	}
	if got := strings.Join(src.Platforms(), ","); got != "linux/amd64,linux/arm64" {
		t.Errorf("platforms %q", got)
	}
	_, err := src.Rexd("freebsd", "riscv64")
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "linux/amd64, linux/arm64") {
		t.Errorf("unsupported platform: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "rexd-linux-386.gz"), []byte("not gzip"), 0o644)
	if _, err := src.Rexd("linux", "386"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a corrupt build: %v", err)
	}
}

func TestEmptyEmbeddedSaysHowToBuild(t *testing.T) {
	src := Dir(t.TempDir())
	_, err := src.Rexd("linux", "amd64")
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("no builds at all: %v", err)
	}
}

func TestChainAndFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "rexd")
	os.WriteFile(p, []byte("sibling"), 0o755)
	src := Chain(Dir(t.TempDir()), File("linux", "amd64", p))
	b, err := src.Rexd("linux", "amd64")
	if err != nil || string(b.Data) != "sibling" {
		t.Fatalf("chain fell through to the file: %q %v", b.Data, err)
	}
	if _, err := src.Rexd("linux", "arm64"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("file source for another platform: %v", err)
	}
}

// The embedded builds, when `make build` put them there, decompress to a
// binary whose hash is its name's promise; without them the error says so.
func TestEmbedded(t *testing.T) {
	src := Embedded()
	plats := src.Platforms()
	if len(plats) == 0 {
		if _, err := src.Rexd("linux", "amd64"); err == nil || !strings.Contains(err.Error(), "make build") {
			t.Fatalf("no embedded builds but no hint: %v", err)
		}
		return
	}
	for _, p := range plats {
		goos, goarch, _ := strings.Cut(p, "/")
		b, err := src.Rexd(goos, goarch)
		if err != nil || len(b.Data) < 1<<20 || !bytes.HasPrefix(b.Data, []byte("\x7fELF")) {
			t.Errorf("embedded %s: %d bytes, %v", p, len(b.Data), err)
		}
	}
}

func TestLocalRexdInstallsOnce(t *testing.T) {
	dir := t.TempDir()
	data := []byte("#!/bin/sh\necho fake\n")
	os.WriteFile(filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH), data, 0o755)
	cache := t.TempDir()
	// The test binary has no rexd beside it, so the build is installed.
	src := Dir(dir)
	b, _ := src.Rexd(runtime.GOOS, runtime.GOARCH)
	p1, err := LocalRexd(src, cache, "9.9.9")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "rexd", "9.9.9-"+b.SHA256[:12], "rexd"); p1 != want {
		t.Fatalf("installed at %s, want %s", p1, want)
	}
	fi, _ := os.Stat(p1)
	p2, err := LocalRexd(src, cache, "9.9.9")
	fi2, _ := os.Stat(p2)
	if err != nil || p2 != p1 || !os.SameFile(fi, fi2) {
		t.Fatalf("second install rewrote the file: %v", err)
	}
	if fi.Mode().Perm()&0o100 == 0 {
		t.Error("not executable")
	}
}
