package payload

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
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
		data, err := b.Bytes()
		sum := sha256.Sum256(tt.want)
		if err != nil || !bytes.Equal(data, tt.want) || b.SHA256 != hex.EncodeToString(sum[:]) || b.Size != int64(len(tt.want)) || b.Platform() != "linux/"+tt.arch {
			t.Errorf("%s: %+v %q %v", tt.arch, b, data, err)
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
	if got := strings.Join(src.Platforms(), ","); got != "linux/386,linux/amd64,linux/arm64" {
		t.Errorf("platforms %q", got)
	}
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
	data, derr := b.Bytes()
	if err != nil || derr != nil || string(data) != "sibling" {
		t.Fatalf("chain fell through to the file: %q %v %v", data, err, derr)
	}
	if _, err := src.Rexd("linux", "arm64"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("file source for another platform: %v", err)
	}
}

// The embedded builds, when `make build` put them there, each carry a
// manifest and decompress to the executable it names (this is the build-time
// check that manifest and build agree); without builds the error says so.
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
		if _, err := fs.Stat(embedded, "rexd/rexd-"+goos+"-"+goarch+".sum"); err != nil {
			t.Errorf("embedded %s has no manifest (make payload writes it): %v", p, err)
		}
		b, err := src.Rexd(goos, goarch)
		if err != nil {
			t.Fatalf("embedded %s: %v", p, err)
		}
		data, err := b.Bytes()
		if err != nil || len(data) < 1<<20 || !bytes.HasPrefix(data, []byte("\x7fELF")) {
			t.Errorf("embedded %s: %d bytes, %v", p, len(data), err)
			continue
		}
		// What the build says it was built for: the platform its name
		// claims, static (it runs on any libc, or none), and for 32-bit
		// ARM the ARMv6 instruction set, so that a Raspberry Pi Zero
		// (armv6l) runs it as well as an armv7l one.
		info, err := buildinfo.Read(bytes.NewReader(data))
		if err != nil {
			t.Errorf("embedded %s: no build information: %v", p, err)
			continue
		}
		want := map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0"}
		if goarch == "arm" {
			want["GOARM"] = "6"
		}
		for _, st := range info.Settings {
			if w, ok := want[st.Key]; ok {
				if st.Value != w {
					t.Errorf("embedded %s: built with %s=%s, want %s", p, st.Key, st.Value, w)
				}
				delete(want, st.Key)
			}
		}
		if len(want) > 0 {
			t.Errorf("embedded %s: its build information has no %v", p, want)
		}
	}
	// The platforms rex maps a target's `uname -sm` to on Linux, a 32-bit
	// Raspberry Pi's among them.
	for _, p := range []string{"linux/amd64", "linux/arm64", "linux/arm"} {
		if !slices.Contains(plats, p) {
			t.Errorf("rex carries no rexd for %s (it has %v): PAYLOAD_PLATFORMS in the Makefile", p, plats)
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

func writeManifest(t *testing.T, path, sum string, size int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(fmt.Sprintf("%s %d\n", sum, size)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func hexSum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// With a manifest, a build's identity is known without reading the build:
// a build that cannot even be decompressed still names its hash; it is
// refused only when its bytes are asked for.
func TestManifestIsReadInsteadOfTheBuild(t *testing.T) {
	dir := t.TempDir()
	real := []byte("#!fake rexd amd64, the real one")
	os.WriteFile(filepath.Join(dir, "rexd-linux-amd64.gz"), []byte("not gzip at all"), 0o644)
	writeManifest(t, filepath.Join(dir, "rexd-linux-amd64.sum"), hexSum(real), len(real))
	b, err := Dir(dir).Rexd("linux", "amd64")
	if err != nil || b.SHA256 != hexSum(real) || b.Size != int64(len(real)) {
		t.Fatalf("identity from the manifest: %+v %v", b, err)
	}
	if _, err := b.Bytes(); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("a corrupt build behind a manifest: %v", err)
	}
}

// A build whose bytes are not what its manifest says is refused when it
// would be copied, in one sentence that says to rebuild; so is a manifest
// that cannot be read.
func TestManifestMismatchIsRefused(t *testing.T) {
	data := []byte("#!fake rexd amd64")
	other := []byte("#!another build")
	for _, tt := range []struct {
		name, manifest string
		wantErr        string // from Rexd; "" means Bytes fails instead
	}{
		{"other hash", fmt.Sprintf("%s %d\n", hexSum(other), len(data)), ""},
		{"other size", fmt.Sprintf("%s %d\n", hexSum(data), len(data)+1), ""},
		{"not a manifest", "hello\n", "not"},
		{"upper case", fmt.Sprintf("%s %d\n", strings.ToUpper(hexSum(data)), len(data)), "lowercase"},
		{"no size", hexSum(data) + "\n", "not"},
		{"negative size", fmt.Sprintf("%s -1\n", hexSum(data)), "positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeGz(t, filepath.Join(dir, "rexd-linux-amd64.gz"), data)
			os.WriteFile(filepath.Join(dir, "rexd-linux-amd64.sum"), []byte(tt.manifest), 0o644)
			b, err := Dir(dir).Rexd("linux", "amd64")
			if tt.wantErr != "" {
				if !errors.Is(err, ErrManifest) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "make build") {
					t.Fatalf("Rexd: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Rexd: %v", err)
			}
			got, err := b.Bytes()
			if !errors.Is(err, ErrManifest) || got != nil || !strings.Contains(err.Error(), "linux/amd64") || !strings.Contains(err.Error(), "make build") {
				t.Fatalf("Bytes: %q %v", got, err)
			}
		})
	}
	if _, err := (Binary{GOOS: "linux", GOARCH: "amd64"}).Bytes(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a zero Binary: %v", err)
	}
}

// LocalRexd never installs a build that does not match its manifest.
func TestLocalRexdRefusesAMismatch(t *testing.T) {
	dir := t.TempDir()
	data := []byte("#!/bin/sh\necho fake\n")
	name := filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
	os.WriteFile(name, data, 0o755)
	writeManifest(t, name+".sum", hexSum([]byte("something else")), len(data))
	cache := t.TempDir()
	if _, err := LocalRexd(Dir(dir), cache, "9.9.9"); !errors.Is(err, ErrManifest) {
		t.Fatalf("installed a mismatching build: %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(cache, "rexd")); len(ents) != 0 {
		t.Errorf("left %v in the cache", ents)
	}
}
