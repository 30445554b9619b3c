package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/payload"
)

// TestEmbeddedRexdBootstraps: a rex with no rexd beside it (as installed
// from a release) uploads the rexd build it carries. `make test` builds the
// payload first, as `make build` does.
func TestEmbeddedRexdBootstraps(t *testing.T) {
	if len(payload.Embedded().Platforms()) == 0 {
		t.Fatal("the embedded rexd builds are missing: run `make payload` (make test and make build do) before go test")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "rex")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/rexconsole/rex/cmd/rex").CombinedOutput(); err != nil {
		t.Fatalf("build rex: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "rexd")); err == nil {
		t.Fatal("a rexd beside the test's rex would hide the embedded one")
	}
	f := newSSHFleet(t, 1, false)
	f.bin = bin
	out, errOut, code := f.run("run", "h1", "--", "echo", "embedded")
	if code != 0 || strings.TrimSpace(out) != "h1: embedded" {
		t.Fatalf("run with the embedded rexd: %d %q %q", code, out, errOut)
	}
	// local works too: the embedded build is installed under the cache.
	out, errOut, code = f.run("run", "local", "--", "echo", "here")
	if code != 0 || strings.TrimSpace(out) != "local: here" {
		t.Fatalf("local with the embedded rexd: %d %q %q", code, out, errOut)
	}
	matches, _ := filepath.Glob(filepath.Join(f.home, ".cache", "rex", "rexd", "*", "rexd"))
	if len(matches) != 1 {
		t.Errorf("installed local rexd: %v", matches)
	}
}
