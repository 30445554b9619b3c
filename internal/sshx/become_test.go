package sshx

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
	"github.com/rexconsole/rex/internal/version"
)

// TestBecomeAnotherUser: through sudo as a user other than root, rexd runs
// as that user from that user's own cache (a copy made through sudo,
// checked like any cached rexd: a 0700 directory of that user, not a
// symlink), because that user cannot read the login user's 0700 cache;
// the login user's cache is never loosened. The second connection finds
// the copy. With a sudo that wants a password, it is asked once per
// connection.
func TestBecomeAnotherUser(t *testing.T) {
	_, sum := rexdBinary(t)
	entry := version.Version + "-" + sum[:12]
	for _, tc := range []struct {
		name     string
		policy   sshtest.SudoPolicy
		password string
	}{
		{"nopasswd", sshtest.SudoNoPasswd, ""},
		{"password", sshtest.SudoPassword, "s3cret-become"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			login := sshtest.NewUser(t, sshtest.UserOptions{Sudo: tc.policy, Password: tc.password})
			app := sshtest.NewUser(t, sshtest.UserOptions{})
			s := e.server(sshtest.Options{User: login.Name, Home: login.Home})
			o := e.opts()
			var asked atomic.Int32
			o.SudoPassword = func(target, user string) ([]byte, error) {
				asked.Add(1)
				if target != "h1" || user != app.Name {
					t.Errorf("password asked for %s on %s", user, target)
				}
				return []byte(tc.password), nil
			}
			d := NewDialer(o)
			tg := e.target("h1", s)
			tg.Become = app.Name

			// The login user has a cache of its own already (a plain session).
			plain := connect(t, d, e.target("h1", s))
			loginCache := filepath.Dir(filepath.Dir(plain.Info.RemotePath))
			plain.Close()

			c := connect(t, d, tg)
			if out, code := runOn(t, c, "id", "-un"); code != 0 || strings.TrimSpace(out) != app.Name {
				t.Fatalf("id -un: %q exit %d, want %s", out, code, app.Name)
			}
			want := filepath.Join(app.Home, ".cache", "rexd", entry, "rexd")
			if !c.Info.Uploaded || c.Info.Method != "sudo" || c.Info.RemotePath != want {
				t.Errorf("bootstrap %+v, want a copy through sudo at %s", c.Info, want)
			}
			for _, p := range []string{filepath.Dir(want), filepath.Dir(filepath.Dir(want))} {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if st := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != app.UID {
					t.Errorf("%s: mode %v, uid %d; want a 0700 directory of %s (uid %d)", p, fi.Mode(), st.Uid, app.Name, app.UID)
				}
			}
			if fi, err := os.Lstat(want); err != nil || int(fi.Sys().(*syscall.Stat_t).Uid) != app.UID || fileSum(t, want) != sum {
				t.Errorf("%s is not %s's copy of the build: %v", want, app.Name, err)
			}
			if fi, err := os.Lstat(loginCache); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("the login user's cache %s: %v %v, want it left 0700", loginCache, fi.Mode(), err)
			}
			ents, _ := os.ReadDir(filepath.Dir(want))
			if len(ents) != 1 {
				t.Errorf("%s holds %d entries, want only rexd (no temporary files)", filepath.Dir(want), len(ents))
			}
			c.Close()
			wantAsks := int32(0)
			if tc.password != "" {
				wantAsks = 1
			}
			if n := asked.Load(); n != wantAsks {
				t.Errorf("the password was asked %d times for one connection, want %d", n, wantAsks)
			}

			// A new rex (Dialer) finds that user's copy and hashes it first.
			d2 := NewDialer(o)
			again := connect(t, d2, tg)
			if !again.Info.Cached || again.Info.Uploaded || !again.Info.Hashed || again.Info.RemotePath != want {
				t.Errorf("second bootstrap %+v, want %s's cached copy, hashed", again.Info, app.Name)
			}
			if out, code := runOn(t, again, "id", "-un"); code != 0 || strings.TrimSpace(out) != app.Name {
				t.Errorf("id -un the second time: %q exit %d", out, code)
			}
		})
	}
}
