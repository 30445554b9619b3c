package sshx

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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
	dir := t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bin)
	zw.Close()
	build := filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
	writeFile(t, build+".gz", gz.String())
	if err := os.WriteFile(build+".sum", []byte(sum+" "+strconv.Itoa(len(bin))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// A PATH with every tool of the usual ones but gzip.
	noGzip := t.TempDir()
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() == "gzip" {
				continue
			}
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(noGzip, e.Name())) // the first of a name wins
		}
	}

	tests := []struct {
		name     string
		env      map[string]string
		method   string
		uploaded int
	}{
		{"gzip", nil, "sftp+gzip", gz.Len()},
		{"no gzip", map[string]string{"PATH": noGzip}, "sftp", len(bin)},
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
