package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/mcptest"
)

// rexBin is the real rex binary with rexd beside it, built once for the
// package's end-to-end tests (rex finds rexd next to itself for `local`).
var rexBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rex-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rexBin = filepath.Join(dir, "rex")
	for _, b := range []struct{ out, pkg string }{
		{rexBin, "github.com/rexconsole/rex/cmd/rex"},
		{filepath.Join(dir, "rexd"), "github.com/rexconsole/rex/cmd/rexd"},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", b.pkg, err, out)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	mcptest.Close()
	os.Exit(code)
}
