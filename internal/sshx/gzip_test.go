package sshx

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/version"
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
			if !c.Info.Uploaded || c.Info.Method != tc.method || c.Info.BytesUploaded != int64(tc.uploaded) {
				t.Fatalf("bootstrap %+v, want %d bytes uploaded by %s", c.Info, tc.uploaded, tc.method)
			}
			if got := fileSum(t, c.Info.RemotePath); got != sum {
				t.Errorf("installed rexd has sha256 %s, want %s", got, sum)
			}
			if out, code := runOn(t, c, "echo", "up"); code != 0 || out != "up\n" {
				t.Errorf("rexd does not run: %q, exit %d", out, code)
			}
			vdir := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+sum[:12])
			entries, err := os.ReadDir(vdir)
			if err != nil || len(entries) != 1 || entries[0].Name() != "rexd" {
				t.Errorf("%s holds %v (%v), want rexd alone", vdir, entries, err)
			}
		})
	}
}
