package sshx

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshtest"
)

// TestColdStartFastPath: a new rex process (a new Dialer sharing the
// stamps file) starts a rexd it verified before with one stat on the
// target: it runs even where uname, id and ls are gone. The fast path
// takes nothing else: a copy in its place (another inode), a version
// directory loosened to 0755 or replaced by a symbolic link all go the
// checked way (hashed, tightened back, or not used at all).
func TestColdStartFastPath(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, tools, rexd string)
		check  func(t *testing.T, c *Conn, rexd string)
		told   bool // rexd was given its hash, not left to hash itself
	}{
		{"unchanged, without uname, id and ls",
			func(t *testing.T, tools, _ string) {
				for _, n := range []string{"uname", "id", "ls"} {
					if err := os.Remove(filepath.Join(tools, n)); err != nil {
						t.Fatal(err)
					}
				}
			},
			func(t *testing.T, c *Conn, rexd string) {
				if !c.Info.Cached || c.Info.Hashed || c.Info.RemotePath != rexd {
					t.Errorf("bootstrap %+v, want %s run as it is", c.Info, rexd)
				}
			}, true},
		{"replaced by a copy",
			func(t *testing.T, _, rexd string) {
				b, err := os.ReadFile(rexd)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(rexd+".copy", b, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(rexd+".copy", rexd); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, c *Conn, rexd string) {
				if !c.Info.Cached || !c.Info.Hashed || c.Info.RemotePath != rexd {
					t.Errorf("bootstrap %+v, want %s hashed before it ran", c.Info, rexd)
				}
			}, false},
		{"version directory loosened",
			func(t *testing.T, _, rexd string) {
				if err := os.Chmod(filepath.Dir(rexd), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, c *Conn, rexd string) {
				if !c.Info.Cached || c.Info.RemotePath != rexd {
					t.Errorf("bootstrap %+v, want %s run", c.Info, rexd)
				}
				if fi, err := os.Stat(filepath.Dir(rexd)); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("version directory %v (%v), want it tightened back to 0700", fi.Mode(), err)
				}
			}, false},
		{"version directory a symbolic link",
			func(t *testing.T, _, rexd string) {
				vdir := filepath.Dir(rexd)
				if err := os.Rename(vdir, vdir+".real"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(vdir+".real", vdir); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T, c *Conn, rexd string) {
				if c.Info.RemotePath == rexd || !c.Info.Uploaded {
					t.Errorf("bootstrap %+v, want a fresh copy elsewhere, not %s through the link", c.Info, rexd)
				}
			}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			tools := toolsPath(t, nil)
			// TMPDIR keeps the last cache candidate in the test's own files.
			s := e.server(sshtest.Options{Env: map[string]string{"PATH": tools, "TMPDIR": t.TempDir()}})
			o := e.opts()
			o.StampsFile = filepath.Join(t.TempDir(), "rexd-stamps.json")
			first := connect(t, NewDialer(o), e.target("h1", s))
			if !first.Info.Uploaded {
				t.Fatalf("first: %+v, want an upload", first.Info)
			}
			first.Close()
			tc.change(t, tools, first.Info.RemotePath)
			c := connect(t, NewDialer(o), e.target("h1", s))
			tc.check(t, c, first.Info.RemotePath)
			if told := strings.Contains(rexdCmdline(t, c), " --build-hash "+fileSum(t, c.Info.RemotePath)+" "); told != tc.told {
				t.Errorf("rexd's command line %q: given its hash %v, want %v", rexdCmdline(t, c), told, tc.told)
			}
			if got, want := c.Session.Info.BuildHash, fileSum(t, c.Info.RemotePath); got != want {
				t.Errorf("rexd reports build hash %s, its file's is %s", got, want)
			}
			if out, code := runOn(t, c, "echo", "up"); code != 0 || out != "up\n" {
				t.Errorf("rexd does not run: %q, exit %d", out, code)
			}
		})
	}
}

// TestFirstContactStartsTheCopyByTheFastPath: after an upload, the fresh
// copy starts with one stat too (installScript reports its stat): uname
// runs once in all, for the probe of the miss, not again for the start.
// The parents of the cache directory are read with one stat, and no
// candidate that holds no rexd is checked: ls runs for the probe's two
// directories and the install's one (12 times here before: a process per
// parent per check). The install starts the copy itself, in the same
// exec (head cuts the build from the input that rexd reads next); a
// target whose head takes no -c installs and starts apart.
func TestFirstContactStartsTheCopyByTheFastPath(t *testing.T) {
	for _, noHead := range []bool{false, true} {
		t.Run(map[bool]string{false: "one exec", true: "no head -c"}[noHead], func(t *testing.T) {
			e := newEnv(t)
			dir := t.TempDir()
			counted := func(tool string) string {
				return "#!/bin/sh\necho x >> " + filepath.Join(dir, tool) + "\nexec /usr/bin/" + tool + " \"$@\"\n"
			}
			fakes := map[string]string{"uname": counted("uname"), "ls": counted("ls"), "stat": counted("stat"), "head": counted("head"), "gzip": counted("gzip")}
			if noHead {
				// A head without -c, as a small busybox has.
				fakes["head"] = "#!/bin/sh\ncase $1 in -c*) echo \"head: invalid option -- c\" >&2; exit 1;; esac\nexec /usr/bin/head \"$@\"\n"
			}
			tools := toolsPath(t, fakes)
			s := e.server(sshtest.Options{Env: map[string]string{"PATH": tools, "TMPDIR": t.TempDir()}})
			o := e.opts()
			gzDir, _ := gzipBuildDir(t)
			o.Payload = payload.Dir(gzDir) // as rex embeds its builds
			c := connect(t, NewDialer(o), e.target("h1", s))
			if !c.Info.Uploaded || c.Info.Method != "stdin+gzip" {
				t.Fatalf("bootstrap %+v, want a compressed upload", c.Info)
			}
			count := func(tool string) int { return strings.Count(readFile(t, filepath.Join(dir, tool)), "x") }
			if n := count("uname"); n != 1 {
				t.Errorf("uname ran %d times, want once (the probe)", n)
			}
			if n := count("ls"); n > 3 {
				t.Errorf("ls ran %d times, want at most 3", n)
			}
			// The parents' stat, the installed copy's; a start apart
			// takes the fast path's too.
			if n, want := count("stat"), map[bool]int{false: 2, true: 3}[noHead]; n != want {
				t.Errorf("stat ran %d times, want %d", n, want)
			}
			// The build is unpacked once: a head without -c is found
			// out before anything is read.
			if n := count("gzip"); n != 1 {
				t.Errorf("gzip ran %d times, want once", n)
			}
			if !noHead && count("head") != 2 {
				t.Errorf("head ran %d times, want twice (is -c there, then the build): the install did not read a counted build", count("head"))
			}
			if !strings.Contains(rexdCmdline(t, c), " --build-hash "+fileSum(t, c.Info.RemotePath)+" ") {
				t.Errorf("the fresh copy hashed itself: %q, want --build-hash given", rexdCmdline(t, c))
			}
			if out, code := runOn(t, c, "echo", "up"); code != 0 || out != "up\n" {
				t.Errorf("rexd does not run: %q, exit %d", out, code)
			}
		})
	}
}

// rexdCmdline is the command line of the rexd that serves c, read by a
// child of it from /proc (the hosts of these tests are this machine).
func rexdCmdline(t *testing.T, c *Conn) string {
	t.Helper()
	out, code := runOn(t, c, "sh", "-c", `tr "\0" " " < /proc/$PPID/cmdline`)
	if code != 0 {
		t.Fatalf("read rexd's command line: exit %d", code)
	}
	return out
}
