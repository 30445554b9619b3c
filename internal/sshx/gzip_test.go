package sshx

import (
	"testing"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshtest"
)

// TestCompressedUpload: a build stored gzip-compressed (as rex embeds
// them) is copied so, unpacked by the target's gzip and hashed there
// before it is installed; a target without gzip gets it uncompressed.
// Either way nothing but the installed rexd is left in its directory.
func TestCompressedUpload(t *testing.T) {
	bin, sum := rexdBinary(t)
	dir, gzLen := gzipBuildDir(t)
	tests := []struct {
		name     string
		env      map[string]string
		method   string
		uploaded int
	}{
		{"gzip", nil, "stdin+gzip", gzLen},
		{"no gzip", map[string]string{"PATH": toolsPath(t, nil, "gzip")}, "stdin", len(bin)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.server(sshtest.Options{Env: tc.env})
			o := e.opts()
			o.Payload = payload.Dir(dir)
			c := connect(t, NewDialer(o), e.target("h1", s))
			assertInstalled(t, c, s, tc.method, tc.uploaded, sum)
		})
	}
}
