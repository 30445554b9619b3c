package sshx

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/version"
)

// uniqueBuildDir is a payload directory holding the local rexd build with
// random bytes after its end (it runs the same), so that its version
// directory is this test's own, even in root's cache, which every test
// that runs as root shares.
func uniqueBuildDir(t *testing.T) (dir, sum string) {
	t.Helper()
	bin, _ := rexdBinary(t)
	tail := make([]byte, 32)
	rand.Read(tail)
	bin = append(bin, tail...)
	dir = t.TempDir()
	build := filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
	if err := os.WriteFile(build, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeManifest(build); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(bin)
	return dir, hex.EncodeToString(s[:])
}

// stampOf is a file's stat as bootScript's stamp takes it.
func stampOf(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("stat", "-c", "%d:%i:%s:%Y:%Z", path).Output()
	if err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return strings.TrimSpace(string(out))
}

// assertRootPrivate checks that p is a directory of root with mode 0700,
// not a symbolic link.
func assertRootPrivate(t *testing.T, p string) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != 0o700 || st.Uid != 0 {
		t.Errorf("%s: mode %v, uid %d; want a 0700 directory of root", p, fi.Mode(), st.Uid)
	}
}

// TestSudoRunsRootsOwnCopy: through sudo as root, the rexd that runs is
// root's own copy, in root's cache (a 0700 directory of root), made as
// root from the login user's verified copy and checked against the hash
// rex sent; never the login user's file, which that user could swap
// between the check and sudo's exec. The swap is played by a login copy
// replaced after this rex recorded its stat (so the login side takes it
// for the verified one): root refuses to copy it, it never runs, and rex
// replaces it and starts root's good copy.
func TestSudoRunsRootsOwnCopy(t *testing.T) {
	dir, sum := uniqueBuildDir(t)
	entry := version.Version + "-" + sum[:12]
	e := newEnv(t)
	login := sshtest.NewUser(t, sshtest.UserOptions{Sudo: sshtest.SudoNoPasswd})
	root, err := user.Lookup("root")
	if err != nil {
		t.Fatal(err)
	}
	rootCopy := filepath.Join(root.HomeDir, ".cache", "rexd", entry, "rexd")
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(rootCopy)) })
	s := e.server(sshtest.Options{User: login.Name, Home: login.Home})
	o := e.opts()
	o.Payload = payload.Dir(dir)
	o.StampsFile = filepath.Join(t.TempDir(), "rexd-stamps.json")
	tg := e.target("h1", s)
	tg.Become = "root"

	check := func(c *Conn) {
		t.Helper()
		if out, code := runOn(t, c, "id", "-u"); code != 0 || strings.TrimSpace(out) != "0" {
			t.Fatalf("id -u: %q exit %d, want 0", out, code)
		}
		if c.Info.RemotePath != rootCopy {
			t.Errorf("rexd runs from %s, want root's copy %s", c.Info.RemotePath, rootCopy)
		}
		if out, code := runOn(t, c, "sh", "-c", "readlink /proc/$PPID/exe"); code != 0 || strings.TrimSpace(out) != rootCopy {
			t.Errorf("the running rexd is %q (exit %d), want %s", out, code, rootCopy)
		}
		fi, err := os.Lstat(rootCopy)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm()&0o022 != 0 || fileSum(t, rootCopy) != sum {
			t.Errorf("%s: mode %v, uid %d; want root's file of the build", rootCopy, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid)
		}
		assertRootPrivate(t, filepath.Dir(rootCopy))
		assertRootPrivate(t, filepath.Dir(filepath.Dir(rootCopy)))
	}

	first := connect(t, NewDialer(o), tg)
	check(first)
	first.Close()
	userCopy := filepath.Join(login.Home, ".cache", "rexd", entry, "rexd")
	if fileSum(t, userCopy) != sum {
		t.Fatalf("the login user's copy %s is not the build", userCopy)
	}

	// The swap: another program in the login user's file, with the stat
	// this rex has on record.
	swap := func() {
		t.Helper()
		fake := "#!/bin/sh\ntouch \"$0.ran\"\nexit 1\n"
		if err := os.WriteFile(userCopy+".new", []byte(fake), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(userCopy+".new", login.UID, login.GID); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(userCopy+".new", userCopy); err != nil {
			t.Fatal(err)
		}
		var stamps map[string]map[string]string
		if b, err := os.ReadFile(o.StampsFile); err != nil || json.Unmarshal(b, &stamps) != nil {
			t.Fatalf("read %s: %v", o.StampsFile, err)
		}
		swapped := false
		for _, m := range stamps {
			if _, ok := m[userCopy]; ok {
				m[userCopy] = stampOf(t, userCopy)
				swapped = true
			}
		}
		if !swapped {
			t.Fatalf("rex recorded no stat for %s: %v", userCopy, stamps)
		}
		b, _ := json.Marshal(stamps)
		if err := os.WriteFile(o.StampsFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// With root's copy in place, the swapped file is not even read.
	fi, err := os.Stat(rootCopy)
	if err != nil {
		t.Fatal(err)
	}
	swap()
	warm := connect(t, NewDialer(o), tg)
	if _, err := os.Stat(userCopy + ".ran"); err == nil {
		t.Fatal("the swapped file was executed")
	}
	check(warm)
	if now, err := os.Stat(rootCopy); err != nil || !os.SameFile(fi, now) || warm.Info.Uploaded {
		t.Errorf("bootstrap %+v: want root's copy run as it was (%v)", warm.Info, err)
	}
	warm.Close()

	// Without it, root copies the swapped file, refuses it and rex
	// replaces it.
	if err := os.RemoveAll(filepath.Dir(rootCopy)); err != nil {
		t.Fatal(err)
	}
	again := connect(t, NewDialer(o), tg)
	if _, err := os.Stat(userCopy + ".ran"); err == nil {
		t.Fatal("the swapped file was executed")
	}
	check(again)
	if !again.Info.Uploaded || fileSum(t, userCopy) != sum {
		t.Errorf("bootstrap %+v: want the login user's copy replaced by an upload", again.Info)
	}
}

// TestCacheParentsAreChecked: a cache directory is used only when every
// parent up to / belongs to root or the account and no one else can write
// it unless it is sticky (OpenSSH's StrictModes); one that fails says
// which parent and why, and the next candidate is tried; the same where
// stat is missing and ls reads each parent. A cached rexd under a parent
// loosened later is not run from there, by the cold start's fast path or
// otherwise.
func TestCacheParentsAreChecked(t *testing.T) {
	_, sum := rexdBinary(t)
	entry := version.Version + "-" + sum[:12]
	tests := []struct {
		name   string
		mode   os.FileMode // of scratch/p
		deep   bool        // XDG_CACHE_HOME is scratch/p/q, not scratch/p
		usable bool
		noStat bool // the target has no stat
	}{
		{"parent 0777", 0o777, false, false, false},
		{"grandparent 0777", 0o777, true, false, false},
		{"parent group-writable", 0o775, false, false, false},
		{"parent 1777 (sticky)", 0o777 | os.ModeSticky, false, true, false},
		{"parent 0755", 0o755, true, true, false},
		{"no stat: grandparent 0777", 0o777, true, false, true},
		{"no stat: parent group-writable", 0o775, false, false, true},
		{"no stat: parent 1777 (sticky)", 0o777 | os.ModeSticky, false, true, true},
		{"no stat: parent 0755", 0o755, true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			home, scratch := sshtest.TempDir(t), sshtest.TempDir(t)
			p := filepath.Join(scratch, "p")
			xdg := p
			if tc.deep {
				xdg = filepath.Join(p, "q")
			}
			if err := os.MkdirAll(xdg, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			// The other candidates cannot be made.
			writeFile(t, filepath.Join(home, ".cache"), "x")
			writeFile(t, filepath.Join(scratch, "tmp"), "x")
			env := map[string]string{
				"XDG_CACHE_HOME": xdg,
				"TMPDIR":         filepath.Join(scratch, "tmp"),
			}
			if tc.noStat {
				env["PATH"] = toolsPath(t, nil, "stat")
			}
			s := e.server(sshtest.Options{Home: home, Env: env})
			d := NewDialer(e.opts())
			if !tc.usable {
				err, _ := dialErr(t, d, e.target("h1", s))
				if !errors.Is(err, ErrNoCacheDir) {
					t.Fatalf("error %v, want no usable directory", err)
				}
				assertOneSentence(t, err, p+", a parent of the cache directory, is writable by other users and not sticky")
				if _, err := os.Lstat(filepath.Join(xdg, "rexd")); err == nil {
					t.Errorf("%s/rexd was made under the unsafe parent", xdg)
				}
				return
			}
			c := connect(t, d, e.target("h1", s))
			if want := filepath.Join(xdg, "rexd", entry, "rexd"); c.Info.RemotePath != want {
				t.Errorf("rexd runs from %s, want %s", c.Info.RemotePath, want)
			}
		})
	}

	// Loosened after the upload: the next start goes elsewhere.
	t.Run("loosened later", func(t *testing.T) {
		e := newEnv(t)
		home, scratch := sshtest.TempDir(t), sshtest.TempDir(t)
		p := filepath.Join(scratch, "p")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(scratch, "tmp")
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(home, ".cache"), "x")
		s := e.server(sshtest.Options{Home: home, Env: map[string]string{"XDG_CACHE_HOME": p, "TMPDIR": tmp}})
		o := e.opts()
		o.StampsFile = filepath.Join(t.TempDir(), "rexd-stamps.json")
		first := connect(t, NewDialer(o), e.target("h1", s))
		if want := filepath.Join(p, "rexd", entry, "rexd"); first.Info.RemotePath != want {
			t.Fatalf("rexd runs from %s, want %s", first.Info.RemotePath, want)
		}
		first.Close()
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
		c := connect(t, NewDialer(o), e.target("h1", s))
		if dir := filepath.Dir(filepath.Dir(c.Info.RemotePath)); dir != filepath.Join(tmp, "rexd-"+strconv.Itoa(os.Geteuid())) || !c.Info.Uploaded {
			t.Errorf("bootstrap %+v, want a fresh copy in %s, not the one under the loosened %s", c.Info, tmp, p)
		}
	})
}

// TestNoSpaceSaysFreeSpace: a probe that cannot create the cache directory
// for want of space says so and asks for free space on it (from the
// script's report, as a target would print it).
func TestNoSpaceSaysFreeSpace(t *testing.T) {
	d := NewDialer(Options{})
	tests := []struct {
		lines []string
		wants []string
		not   string
	}{
		{[]string{"rexd-uname Linux x86_64", "rexd-bad create /full/.cache/rexd", "rexd-badwhy No space left on device", "rexd-bad noexec /tmp/rexd-1"},
			[]string{"/full/.cache/rexd cannot be created: no space left on its file system", "/tmp/rexd-1 does not allow executing programs", "free space on /full/.cache/rexd"}, ""},
		{[]string{"rexd-bad create /q/rexd", "rexd-badwhy Disk quota exceeded"},
			[]string{"/q/rexd cannot be created: no space left", "free space on /q/rexd"}, ""},
		{[]string{"rexd-bad create /x/rexd", "rexd-badwhy Not a directory"},
			[]string{"/x/rexd cannot be created (Not a directory)", "make one of them writable and executable"}, "free space"},
		{[]string{"rexd-badwhy stray", "rexd-bad create /y/rexd"},
			[]string{"/y/rexd cannot be created;"}, "stray"},
	}
	for _, tc := range tests {
		err := d.probeError("h1", parseHeader(tc.lines), exitNoDir, "")
		if !errors.Is(err, ErrNoCacheDir) {
			t.Fatalf("%q: error %v, want no usable directory", tc.lines, err)
		}
		assertOneSentence(t, err, tc.wants...)
		if tc.not != "" && strings.Contains(err.Error(), tc.not) {
			t.Errorf("%q: %q says %q", tc.lines, err, tc.not)
		}
	}
}

// TestProbeCarriesMkdirsReason: the real probe carries why mkdir failed
// into the message: "Not a directory" for a cache under a file, and, where
// a small file system can be mounted (root), "no space left" with "free
// space on" for a full one.
func TestProbeCarriesMkdirsReason(t *testing.T) {
	t.Run("not a directory", func(t *testing.T) {
		e := newEnv(t)
		home, scratch := sshtest.TempDir(t), sshtest.TempDir(t)
		writeFile(t, filepath.Join(scratch, "file"), "x")
		writeFile(t, filepath.Join(home, ".cache"), "x")
		writeFile(t, filepath.Join(scratch, "tmp"), "x")
		s := e.server(sshtest.Options{Home: home, Env: map[string]string{
			"XDG_CACHE_HOME": filepath.Join(scratch, "file"),
			"TMPDIR":         filepath.Join(scratch, "tmp"),
			"LC_ALL":         "C",
		}})
		err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
		if !errors.Is(err, ErrNoCacheDir) {
			t.Fatalf("error %v, want no usable directory", err)
		}
		assertOneSentence(t, err, filepath.Join(scratch, "file", "rexd")+" cannot be created (Not a directory)")
	})
	t.Run("full", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("mounting a small file system needs root")
		}
		full := filepath.Join(sshtest.TempDir(t), "full")
		if err := os.Mkdir(full, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=4,mode=0755", "tmpfs", full).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("umount", full).Run() })
		// Use up its inodes: mkdir then fails with ENOSPC.
		for i := range 8 {
			if os.WriteFile(filepath.Join(full, "f"+strconv.Itoa(i)), nil, 0o600) != nil {
				break
			}
		}
		e := newEnv(t)
		home, scratch := sshtest.TempDir(t), sshtest.TempDir(t)
		writeFile(t, filepath.Join(home, ".cache"), "x")
		writeFile(t, filepath.Join(scratch, "tmp"), "x")
		s := e.server(sshtest.Options{Home: home, Env: map[string]string{
			"XDG_CACHE_HOME": full,
			"TMPDIR":         filepath.Join(scratch, "tmp"),
			"LC_ALL":         "C",
		}})
		err, _ := dialErr(t, NewDialer(e.opts()), e.target("h1", s))
		if !errors.Is(err, ErrNoCacheDir) {
			t.Fatalf("error %v, want no usable directory", err)
		}
		dir := filepath.Join(full, "rexd")
		assertOneSentence(t, err, dir+" cannot be created: no space left on its file system", "free space on "+dir)
	})
}

// TestRootScript runs rootScript itself, as the test's own user (root in
// CI; the script only wants its directories to be its runner's): it execs
// its own private copy of a source that has the expected SHA-256, refuses
// one that has not without running either, and skips a cache directory
// under a parent that others can write.
func TestRootScript(t *testing.T) {
	prog := "#!/bin/sh\ntouch \"$0.ran\"\necho ran \"$0\" \"$@\"\n"
	s := sha256.Sum256([]byte(prog))
	sum := hex.EncodeToString(s[:])
	tests := []struct {
		name   string
		want   string // the SHA-256 rex sent
		loose  bool   // HOME's parent is 0777
		status int
	}{
		{"the build", sum, false, 0},
		{"not the build", strings.Repeat("0", 64), false, exitRootDamaged},
		{"under a loose parent", sum, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scratch := t.TempDir()
			src := filepath.Join(scratch, "src", "rexd")
			writeFile(t, src, prog)
			os.Chmod(src, 0o755)
			home := filepath.Join(scratch, "home")
			if tc.loose {
				home = filepath.Join(scratch, "loose", "home")
			}
			if err := os.MkdirAll(home, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.loose {
				os.Chmod(filepath.Dir(home), 0o777)
			}
			v := "test-" + randomHex(6)
			tmpCopy := filepath.Join("/tmp", "rexd-"+strconv.Itoa(os.Geteuid()), v)
			t.Cleanup(func() { os.RemoveAll(tmpCopy) })
			cmd := exec.Command("/bin/sh", "-c", rootScript, src, tc.want, v, "--stdio", "a b")
			cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin"}
			out, err := cmd.Output()
			status := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			t.Logf("output:\n%s", out)
			if status != tc.status {
				t.Fatalf("exit status %d, want %d", status, tc.status)
			}
			if _, err := os.Stat(src + ".ran"); err == nil {
				t.Error("the source was executed")
			}
			h := parseHeader(lines(out))
			if tc.status != 0 {
				if len(h.bad) != 1 || h.bad[0] != "damaged "+src || h.root != "" {
					t.Errorf("header %+v, want only the source refused", h)
				}
				ents, _ := os.ReadDir(filepath.Join(home, ".cache", "rexd", v))
				if len(ents) != 0 {
					t.Errorf("left %v in root's cache", ents)
				}
				return
			}
			want := filepath.Join(home, ".cache", "rexd", v, "rexd")
			if tc.loose {
				want = filepath.Join(tmpCopy, "rexd")
				if len(h.bad) == 0 || h.bad[0] != "parentmode "+filepath.Dir(home) {
					t.Errorf("reports %q, want %s refused as a loose parent", h.bad, filepath.Dir(home))
				}
			}
			if h.root != want || !strings.Contains(string(out), "ran "+want+" --stdio a b\n") {
				t.Errorf("ran %q, want the copy %s with the arguments", h.root, want)
			}
			if _, err := os.Stat(want + ".ran"); err != nil {
				t.Errorf("the copy did not run: %v", err)
			}
			if fi, err := os.Lstat(want); err != nil || fi.Mode().Perm() != 0o700 || fileSum(t, want) != sum {
				t.Errorf("%s: %v %v, want a private copy of the build", want, fi.Mode(), err)
			}
			for _, d := range []string{filepath.Dir(want), filepath.Dir(filepath.Dir(want))} {
				if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
					t.Errorf("%s: %v %v, want a 0700 directory of the runner", d, fi.Mode(), err)
				}
			}
		})
	}
}

// TestRootDirError: a start through sudo whose rootScript found no
// directory safe for root's copy ends at once, in one sentence naming
// each directory and why; any other launch is not its business.
func TestRootDirError(t *testing.T) {
	h := parseHeader([]string{"rexd-exec /home/u/.cache/rexd/v/rexd 1:2:3:4:5", "rexd-become-ok",
		"rexd-bad parentmode /root", "rexd-bad create /tmp/rexd-0", "rexd-badwhy No space left on device", "rexd-rootfail"})
	err := rootDirError("h1", &launch{header: h, status: exitRootNoDir})
	if !errors.Is(err, ErrNoCacheDir) {
		t.Fatalf("error %v, want no usable directory", err)
	}
	assertOneSentence(t, err, "no directory on h1 is safe for root's own copy of rexd",
		"/root, a parent of the cache directory, is writable by other users and not sticky",
		"/tmp/rexd-0 cannot be created: no space left")
	h.rootFail = false
	if err := rootDirError("h1", &launch{header: h, status: exitRootDamaged}); err != nil {
		t.Errorf("a launch without rexd-rootfail: %v", err)
	}
}
