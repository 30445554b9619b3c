package main

import (
	"bytes"
	"strings"
	"testing"

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
