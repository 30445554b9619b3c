package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestPushWithSudo: --sudo pushes into a root-owned directory on a host
// whose sudo wants a password (asked once on the terminal, given to sudo
// only) and on one with NOPASSWD; without --sudo the same push is refused
// in one sentence; a wrong password ends in one sentence with nothing
// written; a device with "become" needs no flag.
func TestPushWithSudo(t *testing.T) {
	f := newSSHFleet(t, 0, false)
	const password = "s3cret-pw"
	withPw := sshtest.NewUser(t, sshtest.UserOptions{Password: password, Sudo: sshtest.SudoPassword})
	noPw := sshtest.NewUser(t, sshtest.UserOptions{Sudo: sshtest.SudoNoPasswd})
	hp := f.addHost(t, sshtest.Options{User: withPw.Name, Home: withPw.Home})
	hn := f.addHost(t, sshtest.Options{User: noPw.Name, Home: noPw.Home})
	f.setDevice(t, "hp", f.deviceFor(hp))
	f.setDevice(t, "hn", f.deviceFor(hn))

	// A root-owned directory the login users cannot write.
	etc := filepath.Join(sshtest.TempDir(t), "etc")
	os.MkdirAll(etc, 0o755)
	os.Chmod(filepath.Dir(etc), 0o755)
	conf := filepath.Join(f.home, "app.conf")
	os.WriteFile(conf, []byte("setting = 1\n"), 0o644)

	out, errOut, code := f.run("push", conf, etc+"/", "hn")
	if code != 1 || !strings.Contains(errOut, "permission denied ("+etc) || !strings.Contains(errOut, "--sudo") {
		t.Fatalf("push without --sudo: %d %q %q", code, out, errOut)
	}
	// One sentence for the operator: the place, not rex's temporary name
	// in it, and no protocol code or method.
	for _, not := range []string{".rex-", "(-32", "cas.", "unauthorized"} {
		if strings.Contains(errOut, not) {
			t.Errorf("push without --sudo says %q: %q", not, errOut)
		}
	}

	// NOPASSWD: no question asked.
	out, errOut, code = f.run("push", "--sudo", conf, etc+"/nopw/", "hn")
	if code != 0 {
		t.Fatalf("push --sudo to the NOPASSWD host: %d %q %q", code, out, errOut)
	}
	assertRootFile(t, filepath.Join(etc, "nopw/app.conf"), "setting = 1\n")

	// --sudo on the other verbs: run and pull go as root too.
	out, errOut, code = f.run("run", "--sudo", "hn", "--", "id", "-u")
	if code != 0 || out != "hn: 0\n" {
		t.Fatalf("run --sudo: %d %q %q", code, out, errOut)
	}
	private := filepath.Join(etc, "private")
	os.MkdirAll(private, 0o700)
	os.WriteFile(filepath.Join(private, "key"), []byte("root only\n"), 0o600)
	pulled := filepath.Join(f.home, "pulled")
	if out, errOut, code = f.run("pull", private, pulled, "hn"); code == 0 {
		t.Fatalf("pull of a root-only directory without --sudo: %q %q", out, errOut)
	}
	out, errOut, code = f.run("pull", "--sudo", private, pulled, "hn")
	if code != 0 || !strings.Contains(out, "+ key") || read(t, filepath.Join(pulled, "key")) != "root only\n" {
		t.Fatalf("pull --sudo: %d %q %q", code, out, errOut)
	}

	// --chown and --chmod set what is written.
	out, errOut, code = f.run("push", "--sudo", "--chown", "nobody", "--chmod", "F600", conf, etc+"/owned/", "hn")
	if code != 0 {
		t.Fatalf("push --chown: %d %q %q", code, out, errOut)
	}
	if fi, err := os.Stat(filepath.Join(etc, "owned/app.conf")); err != nil || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("--chown nobody --chmod F600 gave %v (%v)", fi.Mode(), err)
	}

	// A password host, from a terminal: asked once, the push goes.
	s := newTmux(t, 160, 40)
	s.line("export HOME=" + f.home + " XDG_CONFIG_HOME= XDG_CACHE_HOME= XDG_STATE_HOME=")
	s.line("rex push --sudo " + conf + " " + etc + "/pw/ hp; echo status1=$?")
	s.waitText("sudo password on hp")
	s.line(password)
	scr := waitStatus(s, "status1=")
	if !strings.Contains(scr, "status1=0") || !strings.Contains(scr, "hp: "+filepath.Join(etc, "pw")+": created") {
		t.Fatalf("push --sudo with the password:\n%s", scr)
	}
	if strings.Contains(scr, password) {
		t.Fatal("the password was echoed")
	}
	assertRootFile(t, filepath.Join(etc, "pw/app.conf"), "setting = 1\n")

	// A wrong password: one sentence, nothing written.
	s.line("clear")
	s.line("rex push --sudo " + conf + " " + etc + "/wrong/ hp; echo status2=$?")
	// The first push's prompt stays on screen until clear has run: wait
	// for a prompt below this command, or the answer is typed ahead and a
	// terminal query at rex's start may eat it.
	s.waitFor("the second password prompt", func(scr string) bool {
		i := strings.Index(scr, "status2=$?")
		return i >= 0 && strings.Contains(scr[i:], "sudo password on hp")
	})
	s.line("not-the-password")
	scr = waitStatus(s, "status2=")
	if !strings.Contains(scr, "status2=255") || !strings.Contains(scr, "sudo on hp refused the password for root; nothing was done there") {
		t.Fatalf("a wrong password:\n%s", scr)
	}
	if _, err := os.Stat(filepath.Join(etc, "wrong")); err == nil {
		t.Fatal("something was written with a wrong password")
	}

	// The password never reaches the target's rexd audit log.
	for _, h := range []string{"/root/.local/state/rexd/audit.log", filepath.Join(withPw.Home, ".local/state/rexd/audit.log")} {
		if b, err := os.ReadFile(h); err == nil && strings.Contains(string(b), password) {
			t.Fatalf("%s holds the password", h)
		}
	}

	// "become": true on the device: no flag needed.
	dev := f.deviceFor(hn)
	dev["become"] = true
	f.setDevice(t, "hn", dev)
	if out, errOut, code = f.run("push", conf, etc+"/become/", "hn"); code != 0 {
		t.Fatalf("push to a become device: %d %q %q", code, out, errOut)
	}
	assertRootFile(t, filepath.Join(etc, "become/app.conf"), "setting = 1\n")
}

func assertRootFile(t *testing.T, p, want string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("%s is owned by uid %d, want root", p, st.Uid)
	}
	if got := read(t, p); got != want {
		t.Errorf("%s = %q", p, got)
	}
}

// waitStatus waits for the "<tag>N" line a test's command ends with.
func waitStatus(s *tmuxSession, tag string) string {
	s.t.Helper()
	return s.waitFor("the exit status", func(scr string) bool {
		for _, l := range strings.Split(scr, "\n") {
			if strings.HasPrefix(l, tag) {
				return true
			}
		}
		return false
	})
}

// TestBecomeUser: a device's "become_user" names who its rexd runs as
// (through sudo, NOPASSWD here), for run and push alike; --sudo on such a
// device becomes that user too.
func TestBecomeUser(t *testing.T) {
	f := newSSHFleet(t, 0, false)
	login := sshtest.NewUser(t, sshtest.UserOptions{Sudo: sshtest.SudoNoPasswd})
	app := sshtest.NewUser(t, sshtest.UserOptions{})
	h := f.addHost(t, sshtest.Options{User: login.Name, Home: login.Home})
	dev := f.deviceFor(h)
	dev["become"] = true
	dev["become_user"] = app.Name
	f.setDevice(t, "h1", dev)

	out, errOut, code := f.run("run", "h1", "--", "id", "-un")
	if code != 0 || out != "h1: "+app.Name+"\n" {
		t.Fatalf("run as become_user: %d %q %q", code, out, errOut)
	}
	if out, errOut, code = f.run("run", "--sudo", "h1", "--", "id", "-un"); code != 0 || out != "h1: "+app.Name+"\n" {
		t.Fatalf("run --sudo on a device with become_user: %d %q %q", code, out, errOut)
	}
	// rexd runs from app's own 0700 cache; the login user's is left as it is.
	cache := filepath.Join(app.Home, ".cache", "rexd")
	if fi, err := os.Lstat(cache); err != nil || fi.Mode().Perm() != 0o700 || int(fi.Sys().(*syscall.Stat_t).Uid) != app.UID {
		t.Errorf("%s: %v, want a 0700 directory of %s", cache, err, app.Name)
	}
	conf := filepath.Join(f.home, "app.conf")
	os.WriteFile(conf, []byte("setting = 2\n"), 0o644)
	dest := filepath.Join(app.Home, "conf") + "/"
	if out, errOut, code = f.run("push", conf, dest, "h1"); code != 0 {
		t.Fatalf("push as become_user: %d %q %q", code, out, errOut)
	}
	fi, err := os.Stat(filepath.Join(app.Home, "conf/app.conf"))
	if err != nil || read(t, filepath.Join(app.Home, "conf/app.conf")) != "setting = 2\n" {
		t.Fatalf("the push did not land in %s: %v", dest, err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; strconv.Itoa(int(uid)) != strings.TrimSpace(runOut(t, "id", "-u", app.Name)) {
		t.Errorf("app.conf is owned by uid %d, want %s's", uid, app.Name)
	}
}

func runOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// TestAttachAndToolRunWithSudo: --sudo on `rex attach` opens the terminal
// as root, and on `rex tool run` runs the tool as root; without it both are
// the login user (a NOPASSWD host: sshd and sudo are real).
func TestAttachAndToolRunWithSudo(t *testing.T) {
	f := newSSHFleet(t, 0, false)
	login := sshtest.NewUser(t, sshtest.UserOptions{Sudo: sshtest.SudoNoPasswd})
	h := f.addHost(t, sshtest.Options{User: login.Name, Home: login.Home})
	f.setDevice(t, "hn", f.deviceFor(h))
	uid := strconv.Itoa(login.UID)

	project := filepath.Join(f.home, "proj")
	tools := filepath.Join(project, ".ai", "tools", "ops")
	os.MkdirAll(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "whoami.sh"), []byte(`#!/bin/bash
# rex: executor_id: rex/core/runtimes/bash/bash
# rex: version: "1.0.0"
# rex: description: say who runs it
echo "uid=$(id -u)"
`), 0o755)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tool", "run", "ops/whoami", "--target", "hn"}, "uid=" + uid},
		{[]string{"tool", "run", "--sudo", "ops/whoami", "--target", "hn"}, "uid=0"},
	} {
		out, errOut, code := f.runIn(project, "", nil, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Fatalf("rex %s: %d %q %q, want %s", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}

	s := newTmux(t, 120, 30)
	s.line("export HOME=" + f.home + " XDG_CONFIG_HOME= XDG_CACHE_HOME= XDG_STATE_HOME=")
	for i, tc := range []struct{ flag, want string }{{"", uid}, {"--sudo ", "0"}} {
		tag := "status" + strconv.Itoa(i) + "="
		s.line("clear; rex attach " + tc.flag + "hn; echo " + tag + "$?")
		s.line(`echo "who-$((6*7))=$(id -u)"`) // the arithmetic shows the shell ran it, not the echo of the line
		// Typed ahead, the line may follow the remote prompt ("$ who-42=0").
		s.waitFor("id -u in the terminal", func(scr string) bool {
			for _, l := range strings.Split(scr, "\n") {
				if strings.HasSuffix(strings.TrimSpace(l), "who-42="+tc.want) {
					return true
				}
			}
			return false
		})
		s.line("exit 0")
		if scr := waitStatus(s, tag); !strings.Contains(scr, tag+"0") {
			t.Fatalf("rex attach %s: \n%s", tc.flag, scr)
		}
	}
}
