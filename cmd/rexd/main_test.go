//go:build linux

package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rexconsole/rex/internal/protocol"
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

// TestFirstRequestsFromTheEnvironment: requests handed in REXD_FIRST are
// read before standard input and answered in order; the variable leaves
// rexd's environment before anything starts, and one that is not base64
// is refused in one sentence.
func TestFirstRequestsFromTheEnvironment(t *testing.T) {
	first := `{"jsonrpc":"2.0","id":1,"method":"session.open","params":{"client_name":"t"}}` + "\n"
	t.Setenv(protocol.FirstEnv, base64.StdEncoding.EncodeToString([]byte(first)))
	in := `{"jsonrpc":"2.0","id":2,"method":"session.info","params":{}}` + "\n"
	var out, errb bytes.Buffer
	code := run([]string{"--stdio", "--no-audit", "--build-hash", strings.Repeat("ab", 32)}, strings.NewReader(in), &out, &errb)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], `"id":1,"result":{"session_id"`) || !strings.Contains(lines[1], `"id":2`) {
		t.Fatalf("exit %d, output %q, stderr %q; want session.open's answer, then session.info's", code, out.String(), errb.String())
	}
	if v, ok := os.LookupEnv(protocol.FirstEnv); ok {
		t.Errorf("%s is still set (%q): the processes rexd starts would inherit it", protocol.FirstEnv, v)
	}

	t.Setenv(protocol.FirstEnv, "not base64!")
	out.Reset()
	errb.Reset()
	if code := run([]string{"--stdio", "--no-audit", "--build-hash", strings.Repeat("ab", 32)}, strings.NewReader(""), &out, &errb); code != 2 || !strings.Contains(errb.String(), "REXD_FIRST is not base64") {
		t.Errorf("exit %d, stderr %q; want exit 2 saying REXD_FIRST is not base64", code, errb.String())
	}
}
