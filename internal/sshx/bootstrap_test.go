package sshx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/version"
)

// TestColdThenWarm: the first connection uploads rexd once, the second
// finds it cached and sends only a handshake's worth of bytes.
func TestColdThenWarm(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	bin, sum := rexdBinary(t)
	var states []string
	var mu sync.Mutex
	o := e.opts()
	o.OnState = func(target, state string, _ error) {
		mu.Lock()
		states = append(states, target+":"+state)
		mu.Unlock()
	}
	d := NewDialer(o)

	cold := connect(t, d, e.target("h1", s))
	if !cold.Info.Uploaded || cold.Info.Cached || cold.Info.BytesUploaded != int64(len(bin)) || cold.Info.Method != "stdin" {
		t.Fatalf("cold bootstrap: %+v, want an upload of %d bytes on one exec's input", cold.Info, len(bin))
	}
	if sent := cold.BytesSent(); sent < int64(len(bin)) {
		t.Errorf("cold connection sent %d bytes, less than rexd's %d", sent, len(bin))
	}
	want := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+sum[:12], "rexd")
	if cold.Info.RemotePath != want {
		t.Errorf("rexd runs from %q, want %q", cold.Info.RemotePath, want)
	}
	if got := fileSum(t, want); got != sum {
		t.Errorf("installed rexd has sha256 %s, want %s", got, sum)
	}
	if out, code := runOn(t, cold, "sh", "-c", "echo $HOME"); code != 0 || strings.TrimSpace(out) != s.Home {
		t.Errorf("remote HOME = %q (exit %d), want %q", out, code, s.Home)
	}
	if cold.Session.Info.Hostname == "" || cold.Session.Info.BuildHash != sum {
		t.Errorf("session info %+v", cold.Session.Info)
	}
	cold.Close()

	warm := connect(t, d, e.target("h1", s))
	if !warm.Info.Cached || warm.Info.Uploaded || warm.Info.BytesUploaded != 0 {
		t.Fatalf("warm bootstrap: %+v, want the cached rexd", warm.Info)
	}
	if sent := warm.BytesSent(); sent > 64<<10 {
		t.Errorf("warm connection sent %d bytes; nothing but the handshake should go out", sent)
	}
	if out, code := runOn(t, warm, "echo", "hi"); code != 0 || out != "hi\n" {
		t.Errorf("echo hi: %q, exit %d", out, code)
	}
	// rexd keeps its audit log on, in the target's own home.
	if _, err := os.Stat(filepath.Join(s.Home, ".local", "state", "rexd", "audit.log")); err != nil {
		t.Errorf("no audit log on the target: %v", err)
	}
	mu.Lock()
	got := strings.Join(states, " ")
	mu.Unlock()
	if wantStates := "h1:connecting h1:bootstrapping h1:ready h1:connecting h1:ready"; got != wantStates {
		t.Errorf("states %q, want %q", got, wantStates)
	}
}

func fileSum(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestConcurrentBootstraps: many rex processes (a Dialer each) bootstrap
// one account at once; all succeed and one whole binary remains.
func TestConcurrentBootstraps(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	_, sum := rexdBinary(t)
	const n = 16
	conns := make([]*Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conns[i], errs[i] = NewDialer(e.opts()).Connect(ctx, e.target("h1", s))
		}()
	}
	wg.Wait()
	uploads := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("bootstrap %d: %v", i, errs[i])
			continue
		}
		defer conns[i].Close()
		if conns[i].Info.Uploaded {
			uploads++
		}
		if out, code := runOn(t, conns[i], "echo", "ok"); code != 0 || out != "ok\n" {
			t.Errorf("bootstrap %d runs echo: %q exit %d", i, out, code)
		}
	}
	if uploads == 0 {
		t.Errorf("no bootstrap uploaded rexd")
	}
	dir := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+sum[:12])
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range ents {
		names = append(names, en.Name())
	}
	if strings.Join(names, ",") != "rexd" {
		t.Errorf("%s holds %v, want only rexd (no temporary files)", dir, names)
	}
	if got := fileSum(t, filepath.Join(dir, "rexd")); got != sum {
		t.Errorf("rexd after the race has sha256 %s, want %s", got, sum)
	}
	t.Logf("%d of %d bootstraps uploaded", uploads, n)
}

// TestNoSFTPFallback: without an sftp subsystem rexd is installed all the
// same (one exec's input, never SFTP), and is cached afterwards.
func TestNoSFTPFallback(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{NoSFTP: true})
	bin, sum := rexdBinary(t)
	d := NewDialer(e.opts())
	c := connect(t, d, e.target("h1", s))
	if !c.Info.Uploaded || c.Info.Method != "stdin" || c.Info.BytesUploaded != int64(len(bin)) {
		t.Fatalf("bootstrap %+v, want an upload of %d bytes on one exec's input", c.Info, len(bin))
	}
	if got := fileSum(t, c.Info.RemotePath); got != sum {
		t.Errorf("installed rexd has sha256 %s, want %s", got, sum)
	}
	if out, code := runOn(t, c, "echo", "cat"); out != "cat\n" || code != 0 {
		t.Errorf("echo: %q exit %d", out, code)
	}
	if again := connect(t, d, e.target("h1", s)); !again.Info.Cached {
		t.Errorf("second bootstrap %+v, want cached", again.Info)
	}
}

// TestCacheDirFallback: an unusable cache directory (in the way, or
// mounted noexec) makes rexd go to the next candidate; none usable is one
// clear sentence naming each and why.
func TestCacheDirFallback(t *testing.T) {
	_, sum := rexdBinary(t)
	entry := version.Version + "-" + sum[:12]
	tmpUser := func(s *sshtest.Server) string {
		u, err := user.Lookup(s.User)
		if err != nil {
			t.Fatal(err)
		}
		return u.Uid
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, home, scratch string) sshtest.Options
		wantDir func(s *sshtest.Server, scratch string) string // "" = want ErrNoCacheDir
		phrases []string
	}{
		{
			name: "XDG_CACHE_HOME is a file",
			setup: func(t *testing.T, home, scratch string) sshtest.Options {
				writeFile(t, filepath.Join(scratch, "xdg"), "not a directory")
				return sshtest.Options{Env: map[string]string{"XDG_CACHE_HOME": filepath.Join(scratch, "xdg")}}
			},
			wantDir: func(s *sshtest.Server, _ string) string { return filepath.Join(s.Home, ".cache", "rexd") },
		},
		{
			name: "home cache is noexec",
			setup: func(t *testing.T, home, scratch string) sshtest.Options {
				return sshtest.Options{
					Noexec: []string{filepath.Join(home, ".cache")},
					Env:    map[string]string{"TMPDIR": scratch},
				}
			},
			wantDir: func(s *sshtest.Server, scratch string) string {
				return filepath.Join(scratch, "rexd-"+tmpUser(s))
			},
		},
		{
			name: "noexec and nothing else",
			setup: func(t *testing.T, home, scratch string) sshtest.Options {
				writeFile(t, filepath.Join(scratch, "tmp"), "x")
				return sshtest.Options{
					Noexec: []string{filepath.Join(home, ".cache")},
					Env:    map[string]string{"TMPDIR": filepath.Join(scratch, "tmp")},
				}
			},
			phrases: []string{"no usable directory for rexd on h1", ".cache/rexd does not allow executing programs (noexec)", "tmp/rexd-"},
		},
		{
			name: "nothing usable",
			setup: func(t *testing.T, home, scratch string) sshtest.Options {
				writeFile(t, filepath.Join(scratch, "xdg"), "x")
				writeFile(t, filepath.Join(home, ".cache"), "x")
				writeFile(t, filepath.Join(scratch, "tmp"), "x")
				return sshtest.Options{Env: map[string]string{
					"XDG_CACHE_HOME": filepath.Join(scratch, "xdg"),
					"TMPDIR":         filepath.Join(scratch, "tmp"),
				}}
			},
			phrases: []string{"no usable directory for rexd on h1", "xdg/rexd cannot be created", ".cache/rexd cannot be created", "tmp/rexd-"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			home, scratch := sshtest.TempDir(t), sshtest.TempDir(t)
			o := tc.setup(t, home, scratch)
			o.Home = home
			s := e.server(o)
			d := NewDialer(e.opts())
			if tc.wantDir == nil {
				err, _ := dialErr(t, d, e.target("h1", s))
				if !errors.Is(err, ErrNoCacheDir) {
					t.Fatalf("error %v, want no usable directory", err)
				}
				assertOneSentence(t, err, tc.phrases...)
				return
			}
			c := connect(t, d, e.target("h1", s))
			if want := filepath.Join(tc.wantDir(s, scratch), entry, "rexd"); c.Info.RemotePath != want {
				t.Errorf("rexd runs from %s, want %s", c.Info.RemotePath, want)
			}
			if again := connect(t, d, e.target("h1", s)); !again.Info.Cached || again.Info.RemotePath != c.Info.RemotePath {
				t.Errorf("second bootstrap %+v, want the cached %s", again.Info, c.Info.RemotePath)
			}
		})
	}
}

// TestDamagedCacheIsReplaced: a cached rexd that is not the build is
// never run, whatever it would say about itself (item 8: the cached
// binary's sha256 is checked before exec), and is replaced by an upload.
func TestDamagedCacheIsReplaced(t *testing.T) {
	_, sum := rexdBinary(t)
	// A fake that answers session.open as the real build would.
	answer := func(hash string) string {
		return "#!/bin/sh\ntouch \"$0.ran\"\nread -r line\n" +
			`printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"session_id":"s1","protocol":"rexd/1","server_version":"0","build_hash":"` + hash + `","platform":"` +
			runtime.GOOS + "/" + runtime.GOARCH + `","capabilities":[],"limits":{},"workspace_roots":[],"cwd":"/"}}'` + "\ncat >/dev/null\n"
	}
	tests := []struct{ name, script string }{
		{"does not start", "#!/bin/sh\ntouch \"$0.ran\"\necho broken >&2\nexit 1\n"},
		{"reports another build hash", answer("0000")},
		{"reports the right build hash", answer(sum)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			s := e.server(sshtest.Options{})
			path := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+sum[:12], "rexd")
			writeFile(t, path, tc.script)
			if err := os.Chmod(path, 0o755); err != nil {
				t.Fatal(err)
			}
			c := connect(t, NewDialer(e.opts()), e.target("h1", s))
			if _, err := os.Stat(path + ".ran"); err == nil {
				t.Error("the damaged rexd was run")
			}
			if !c.Info.Uploaded || c.Info.RemotePath != path {
				t.Errorf("bootstrap %+v, want a fresh upload to %s", c.Info, path)
			}
			if got := fileSum(t, path); got != sum {
				t.Errorf("rexd has sha256 %s after the repair, want %s", got, sum)
			}
		})
	}
}

// TestCachedRexdIsHashedOncePerStamp (item 8): a cached rexd this Dialer
// did not upload is hashed before it runs; once seen (hashed or uploaded),
// it runs unhashed while its stat (device, inode, size, mtime, ctime) is
// unchanged.
func TestCachedRexdIsHashedOncePerStamp(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	d := NewDialer(e.opts())
	cold := connect(t, d, e.target("h1", s))
	if !cold.Info.Uploaded {
		t.Fatalf("cold: %+v", cold.Info)
	}
	if warm := connect(t, d, e.target("h1", s)); !warm.Info.Cached || warm.Info.Hashed {
		t.Errorf("warm, same rex: %+v; want the cached rexd run without hashing (it uploaded it)", warm.Info)
	}
	other := NewDialer(e.opts())
	if c := connect(t, other, e.target("h1", s)); !c.Info.Cached || !c.Info.Hashed {
		t.Errorf("another rex: %+v; want the cached rexd hashed before it ran", c.Info)
	}
	if c := connect(t, other, e.target("h1", s)); !c.Info.Cached || c.Info.Hashed {
		t.Errorf("that rex again: %+v; want no second hashing", c.Info)
	}
	// Any change to the file (here its times) means hashing again.
	now := time.Now().Add(time.Minute)
	if err := os.Chtimes(cold.Info.RemotePath, now, now); err != nil {
		t.Fatal(err)
	}
	if c := connect(t, other, e.target("h1", s)); !c.Info.Cached || !c.Info.Hashed {
		t.Errorf("after a change: %+v; want it hashed again", c.Info)
	}
}

// TestCacheDirsAreCheckedWithoutFollowingSymlinks (item 8): the cache
// directory and its version directory must be this user's own, real
// directories (lstat, not [ -O ], which follows symlinks) with mode 0700;
// a looser mode of ours is tightened, anything else is passed over.
func TestCacheDirsAreCheckedWithoutFollowingSymlinks(t *testing.T) {
	_, sum := rexdBinary(t)
	entry := version.Version + "-" + sum[:12]
	mode := func(t *testing.T, p string) os.FileMode {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	t.Run("a loose mode of ours is tightened", func(t *testing.T) {
		e := newEnv(t)
		home := sshtest.TempDir(t)
		cache := filepath.Join(home, ".cache", "rexd")
		if err := os.MkdirAll(filepath.Join(cache, entry), 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(cache, 0o777)
		os.Chmod(filepath.Join(cache, entry), 0o777)
		s := e.server(sshtest.Options{Home: home})
		c := connect(t, NewDialer(e.opts()), e.target("h1", s))
		if c.Info.RemotePath != filepath.Join(cache, entry, "rexd") {
			t.Errorf("rexd runs from %s", c.Info.RemotePath)
		}
		for _, p := range []string{cache, filepath.Join(cache, entry)} {
			if m := mode(t, p); m.Perm() != 0o700 {
				t.Errorf("%s has mode %v, want 0700", p, m)
			}
		}
	})
	t.Run("a symlinked cache directory is passed over", func(t *testing.T) {
		e := newEnv(t)
		home, scratch, elsewhere := sshtest.TempDir(t), sshtest.TempDir(t), sshtest.TempDir(t)
		os.Chmod(elsewhere, 0o700)
		os.MkdirAll(filepath.Join(home, ".cache"), 0o755)
		if err := os.Symlink(elsewhere, filepath.Join(home, ".cache", "rexd")); err != nil {
			t.Fatal(err)
		}
		s := e.server(sshtest.Options{Home: home, Env: map[string]string{"TMPDIR": scratch}})
		c := connect(t, NewDialer(e.opts()), e.target("h1", s))
		u, _ := user.Lookup(s.User)
		if want := filepath.Join(scratch, "rexd-"+u.Uid, entry, "rexd"); c.Info.RemotePath != want {
			t.Errorf("rexd runs from %s, want %s", c.Info.RemotePath, want)
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Errorf("something was written through the symlink: %v", ents)
		}
	})
	t.Run("a planted tmp directory is refused", func(t *testing.T) {
		e := newEnv(t)
		home, scratch, planted := sshtest.TempDir(t), sshtest.TempDir(t), sshtest.TempDir(t)
		u, err := user.Current() // sshtest logs in as the user running the tests
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(planted, filepath.Join(scratch, "rexd-"+u.Uid)); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(home, ".cache"), "a file, not a directory")
		s := e.server(sshtest.Options{Home: home, Env: map[string]string{"TMPDIR": scratch}})
		err, _ = dialErr(t, NewDialer(e.opts()), e.target("h1", s))
		if !errors.Is(err, ErrNoCacheDir) {
			t.Fatalf("error %v, want no usable directory", err)
		}
		assertOneSentence(t, err, "rexd-"+u.Uid+" is a symbolic link")
	})
	t.Run("a cache directory of another user is passed over", func(t *testing.T) {
		if os.Geteuid() != 0 {
			// Only root can give a directory away; the symlink cases above
			// cover what an unprivileged run can set up.
			t.Log("not root: checked through the symlink cases only")
			return
		}
		e := newEnv(t)
		home, scratch := sshtest.TempDir(t), sshtest.TempDir(t)
		cache := filepath.Join(home, ".cache", "rexd")
		if err := os.MkdirAll(cache, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(cache, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		s := e.server(sshtest.Options{Home: home, Env: map[string]string{"TMPDIR": scratch}})
		c := connect(t, NewDialer(e.opts()), e.target("h1", s))
		if strings.HasPrefix(c.Info.RemotePath, cache) {
			t.Errorf("rexd runs from %s, in a directory of another user", c.Info.RemotePath)
		}
	})
}

// TestUnsupportedPlatform: a target whose platform rex carries no rexd for
// gets one sentence naming its platform and what rex carries.
func TestUnsupportedPlatform(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	dir := sshtest.TempDir(t)
	writeFile(t, filepath.Join(dir, "rexd-linux-"+other), "not really rexd")
	o := e.opts()
	o.Payload = payload.Dir(dir)
	err, _ := dialErr(t, NewDialer(o), e.target("h1", s))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("error %v, want unsupported", err)
	}
	assertOneSentence(t, err, "h1 is linux/"+runtime.GOARCH, "only for linux/"+other)
}

// TestManifestMismatchIsNotUploaded: a payload whose manifest promises a
// hash its build does not have is refused before anything is copied, in
// one sentence that says to rebuild; nothing is left on the target.
func TestManifestMismatchIsNotUploaded(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	bin, _ := rexdBinary(t)
	dir := sshtest.TempDir(t)
	name := filepath.Join(dir, "rexd-"+runtime.GOOS+"-"+runtime.GOARCH)
	writeFile(t, name, string(bin))
	other := sha256.Sum256([]byte("another build"))
	writeFile(t, name+".sum", fmt.Sprintf("%x %d\n", other, len(bin)))
	o := e.opts()
	o.Payload = payload.Dir(dir)
	err, _ := dialErr(t, NewDialer(o), e.target("h1", s))
	if !errors.Is(err, ErrBootstrap) || !errors.Is(err, payload.ErrManifest) {
		t.Fatalf("error %v, want a refused build", err)
	}
	assertOneSentence(t, err, "cannot copy rexd to h1", "manifest", "make build")
	entry := filepath.Join(s.Home, ".cache", "rexd", version.Version+"-"+hex.EncodeToString(other[:])[:12])
	if ents, _ := os.ReadDir(entry); len(ents) != 0 {
		t.Errorf("%s holds %v after a refused build", entry, ents)
	}
}

// TestCheckAndClean: Check reports the platform and the cached rexd
// without uploading; Clean removes this version's cache.
func TestCheckAndClean(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	_, sum := rexdBinary(t)
	d := NewDialer(e.opts())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tg := e.target("h1", s)

	r, err := d.Check(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	want := runtime.GOOS + "/" + runtime.GOARCH
	if r.Platform != want || !r.Supported || r.RexdPath != "" || r.Current || r.Handshake <= 0 || r.RTT <= 0 || r.User != s.User {
		t.Fatalf("check before bootstrap: %+v", r)
	}
	c := connect(t, d, tg)
	c.Close()
	r, err = d.Check(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	if r.RexdPath != c.Info.RemotePath || !r.Current || r.RexdVersion != "rexd "+version.Version+" "+sum {
		t.Fatalf("check after bootstrap: %+v, want %s current", r, c.Info.RemotePath)
	}
	removed, err := d.Clean(ctx, tg)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != filepath.Dir(c.Info.RemotePath) {
		t.Errorf("clean removed %v, want [%s]", removed, filepath.Dir(c.Info.RemotePath))
	}
	if _, err := os.Stat(c.Info.RemotePath); !os.IsNotExist(err) {
		t.Errorf("rexd is still there after clean: %v", err)
	}
	if r, err = d.Check(ctx, tg); err != nil || r.RexdPath != "" {
		t.Errorf("check after clean: %+v, %v", r, err)
	}
}

// TestChattyLoginShell: a login shell that prints to stdout (a .bashrc
// that echoes) neither breaks the bootstrap nor the session.
func TestChattyLoginShell(t *testing.T) {
	e := newEnv(t)
	home := sshtest.TempDir(t)
	writeFile(t, filepath.Join(home, ".bashrc"), "echo hello from bashrc\n")
	writeFile(t, filepath.Join(home, ".zshenv"), "echo hello from zshenv\n")
	s := e.server(sshtest.Options{Home: home})
	d := NewDialer(e.opts())
	probe, err := d.Dial(context.Background(), e.target("h1", s))
	if err != nil {
		t.Fatal(err)
	}
	out, _, _, err := run(context.Background(), probe, "true", nil)
	probe.Close()
	if err != nil || !strings.Contains(string(out), "hello from") {
		t.Fatalf("the login shell is not chatty (%q, %v), so this test would prove nothing", out, err)
	}
	c := connect(t, d, e.target("h1", s))
	if !c.Info.Uploaded {
		t.Errorf("bootstrap %+v, want an upload", c.Info)
	}
	if got, code := runOn(t, c, "echo", "clean"); got != "clean\n" || code != 0 {
		t.Errorf("echo: %q exit %d", got, code)
	}
	if again := connect(t, d, e.target("h1", s)); !again.Info.Cached || again.Info.RemotePath != c.Info.RemotePath {
		t.Errorf("second bootstrap %+v, want the cached %s", again.Info, c.Info.RemotePath)
	}
}

func TestPrefixWriter(t *testing.T) {
	var out strings.Builder
	w := &prefixWriter{w: &out, prefix: "h1: "}
	for _, chunk := range []string{"one\ntw", "o\n", "", "three\nfour"} {
		w.Write([]byte(chunk))
	}
	if got, want := out.String(), "h1: one\nh1: two\nh1: three\n"; got != want {
		t.Errorf("got %q, want %q (an unfinished line waits)", got, want)
	}
	w.Write([]byte(strings.Repeat("x", maxPartialLine+10)))
	if !strings.HasSuffix(out.String(), "x\n") || strings.Count(out.String(), "\n") != 4 {
		t.Errorf("a line that never ends was not flushed: %q", out.String()[len(out.String())-20:])
	}
}

// TestLane: a second rexd starts over the same SSH connection, without an
// upload or a second handshake, and is a process of its own; closing it
// leaves the first one serving.
func TestLane(t *testing.T) {
	e := newEnv(t)
	s := e.server(sshtest.Options{})
	c := connect(t, NewDialer(e.opts()), e.target("h1", s))
	sent := c.BytesSent()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc, sess, err := c.Lane(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if more := c.BytesSent() - sent; more > 64<<10 {
		t.Errorf("the lane sent %d bytes; the cached rexd should just start", more)
	}
	pid := func(s *rexclient.Session) string {
		var out strings.Builder
		p, err := s.Exec(ctx, protocol.ExecStartParams{Argv: []string{"sh", "-c", "echo $PPID"}}, rexclient.ExecOptions{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		p.Wait(ctx)
		return out.String()
	}
	if a, b := pid(c.Session), pid(sess); a == b {
		t.Errorf("the lane's commands run under the same rexd (%s)", a)
	}
	rc.Close()
	if out, code := runOn(t, c, "echo", "still here"); code != 0 || out != "still here\n" {
		t.Errorf("after the lane closed: %q, exit %d", out, code)
	}
	if _, _, err := (&Conn{became: true, d: c.d, SSH: c.SSH}).Lane(ctx); !errors.Is(err, ErrNoLane) {
		t.Errorf("a connection that became another user opened a lane: %v", err)
	}
}
