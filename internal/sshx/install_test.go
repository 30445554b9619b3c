package sshx

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/version"
)

// gzipBuildDir is a payload directory holding the local rexd build stored
// gzip-compressed, as rex embeds its builds; it returns the compressed size.
func gzipBuildDir(t testing.TB) (dir string, gzLen int) {
	t.Helper()
	bin, sum := rexdBinary(t)
	dir = t.TempDir()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(bin)
	zw.Close()
	build := filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
	writeFile(t, build+".gz", gz.String())
	if err := os.WriteFile(build+".sum", []byte(sum+" "+strconv.Itoa(len(bin))+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, gz.Len()
}

// toolsPath is a directory for a target's PATH: every program of the usual
// directories but those named in without, and fakes (name → shell script)
// in place of the real ones.
func toolsPath(t testing.TB, fakes map[string]string, without ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, script := range fakes {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	skip := map[string]bool{}
	for _, n := range without {
		skip[n] = true
	}
	for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if skip[e.Name()] {
				continue
			}
			os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name())) // the first of a name wins
		}
	}
	return dir
}

// TestInstallInOneExec: rexd is installed by one exec that reads the build
// on its input, compressed when the target has gzip, and checks its hash
// there before renaming it into place. A gzip that fails, or unpacks to
// something else, costs a second exec with the plain build (the first
// one also starts rexd when it works: installStart); a target
// without a SHA-256 tool gets a copy that rex hashes when read back (SFTP,
// else `cat`). Every way leaves the installed rexd alone in its directory.
func TestInstallInOneExec(t *testing.T) {
	bin, sum := rexdBinary(t)
	dir, gzLen := gzipBuildDir(t)
	gzipRuns := filepath.Join(t.TempDir(), "gzip.count")
	tests := []struct {
		name     string
		path     string // the target's PATH; "" leaves it as it is
		noSFTP   bool
		method   string
		uploaded int
		counted  bool // gzip counts its runs in gzipRuns
	}{
		{"gzip fails", toolsPath(t, map[string]string{"gzip": "#!/bin/sh\necho x >> " + gzipRuns + "\necho broken >&2\nexit 1\n"}), false, "stdin", len(bin), true},
		{"gzip unpacks something else", toolsPath(t, map[string]string{"gzip": "#!/bin/sh\ncat >/dev/null\necho other\n"}), false, "stdin", len(bin), false},
		{"no SHA-256 tool", toolsPath(t, nil, "sha256sum", "shasum"), false, "sftp+gzip", gzLen, false},
		{"no SHA-256 tool and no SFTP", toolsPath(t, nil, "sha256sum", "shasum"), true, "exec+gzip", gzLen, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			o := sshtest.Options{NoSFTP: tc.noSFTP}
			if tc.path != "" {
				o.Env = map[string]string{"PATH": tc.path}
			}
			s := e.server(o)
			opts := e.opts()
			opts.Payload = payload.Dir(dir)
			c := connect(t, NewDialer(opts), e.target("h1", s))
			assertInstalled(t, c, s, tc.method, tc.uploaded, sum)
			// A gzip that failed is tried once, not again before the
			// plain build.
			if got := readFile(t, gzipRuns); tc.counted && got != "x\n" {
				t.Errorf("the failing gzip ran %d times, want once", strings.Count(got, "x"))
			}
		})
	}
}

// TestInstallRefusesADamagedCopy: a copy whose hash on the target is not
// the build's is never installed or run: the connection fails with one
// sentence that says so and what to do, and nothing is left behind.
func TestInstallRefusesADamagedCopy(t *testing.T) {
	_, sum := rexdBinary(t)
	e := newEnv(t)
	// A target without gzip whose cat adds a byte to what it copies.
	path := toolsPath(t, map[string]string{"cat": "#!/bin/sh\n/bin/cat \"$@\"\necho x\n"}, "gzip")
	s := e.server(sshtest.Options{Env: map[string]string{"PATH": path}})
	err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
	if !errors.Is(err, ErrBootstrap) {
		t.Errorf("error %v, want ErrBootstrap", err)
	}
	assertOneSentence(t, err, "is damaged", "not installed", "retry")
	vdir := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+sum[:12])
	if entries, err := os.ReadDir(vdir); err != nil || len(entries) != 0 {
		t.Errorf("%s holds %v (%v), want nothing", vdir, entries, err)
	}
}

// TestProbeSweepsOldLeftovers: a temporary copy an interrupted install
// left in the version directory over an hour ago is removed by the next
// bootstrap's probe; a recent one (an install under way) is not.
func TestProbeSweepsOldLeftovers(t *testing.T) {
	_, sum := rexdBinary(t)
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	vdir := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+sum[:12])
	old, recent := filepath.Join(vdir, ".rexd.tmp.old"), filepath.Join(vdir, ".rexd.tmp.recent")
	writeFile(t, old, "partial")
	writeFile(t, recent, "partial")
	if err := os.Chmod(filepath.Dir(vdir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vdir, 0o700); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, then, then); err != nil {
		t.Fatal(err)
	}
	c := connect(t, NewDialer(e.opts()), e.target("h1", s))
	if !c.Info.Uploaded {
		t.Fatalf("bootstrap %+v, want an upload", c.Info)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("the old leftover is still there (%v)", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("the recent one is gone: %v", err)
	}
}

// assertInstalled checks a bootstrap that uploaded: by method, that many
// bytes, the build's hash on the target, a rexd that runs, and nothing
// else left in its version directory.
func assertInstalled(t *testing.T, c *Conn, s *sshtest.Server, method string, uploaded int, sum string) {
	t.Helper()
	if !c.Info.Uploaded || c.Info.Method != method || c.Info.BytesUploaded != int64(uploaded) {
		t.Fatalf("bootstrap %+v, want %d bytes uploaded by %s", c.Info, uploaded, method)
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
}
