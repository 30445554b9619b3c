package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/rexd"
)

// TestBuildHashFlag: --build-hash must be a SHA-256 in hex, and --version
// reports what the file holds whatever the flag says.
func TestBuildHashFlag(t *testing.T) {
	own, err := rexd.BuildHash()
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("ab", 32)
	tests := []struct {
		args     []string
		code     int
		out, err string
	}{
		{[]string{"--stdio", "--build-hash", "nothex"}, 2, "", `--build-hash "nothex" is not a SHA-256 in hex`},
		{[]string{"--stdio", "--build-hash", strings.ToUpper(other)}, 2, "", "is not a SHA-256 in hex"},
		{[]string{"--version", "--build-hash", other}, 0, " " + own + "\n", ""},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errb)
		if code != tc.code || !strings.HasSuffix(out.String(), tc.out) || !strings.Contains(errb.String(), tc.err) {
			t.Errorf("rexd %v: exit %d, %q, %q; want exit %d, output ending %q, error holding %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out, tc.err)
		}
	}
}

// The non-blocking flag rexd sets on a pipe it serves belongs to the
// pipe's open file and outlives rexd: only --stdio may set it. A shell that
// runs `rexd --version` and then reads the same stdin must find it as it
// was (printf data | { rexd --version; cat; }). The real binary runs on a
// pipe this test holds, whose flags it then reads.
func TestVersionLeavesStdinBlocking(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "rexd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "stdin"), os.NewFile(uintptr(p[1]), "w")
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(bin, "--version")
	cmd.Stdin = r
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("rexd --version: %v: %s", err, out)
	}
	flags, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_NONBLOCK != 0 {
		t.Error("rexd --version left its stdin non-blocking")
	}
}
