package sshtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SudoPolicy is what sudo lets a test user do.
type SudoPolicy string

// The policies: none, anything with the user's password, anything
// without one.
const (
	SudoNone     SudoPolicy = ""
	SudoPassword SudoPolicy = "password"
	SudoNoPasswd SudoPolicy = "nopasswd"
)

// UserOptions shape a test account.
type UserOptions struct {
	// Password is the account's password; empty leaves it without one
	// (yet not locked, so sshd lets its keys in).
	Password string
	// Sudo is what sudo lets it do, through /etc/sudoers.d.
	Sudo SudoPolicy
}

// User is a login account made for one test: a name no one else uses, a
// home of its own, removed (with its sudoers entry and its processes)
// when the test ends. Pass Name and Home to Options.User and Options.Home.
type User struct {
	Name     string
	UID, GID int
	Home     string
	Password string
}

// NewUser makes a login account. It needs root (CI runs as root) and
// useradd; sudo when Sudo is set. Other tests may make accounts at the
// same time: names are random.
func NewUser(t testing.TB, opts UserOptions) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sshtest.NewUser needs root to make login accounts (CI runs as root)")
	}
	for _, tool := range []string{"useradd", "userdel", "chpasswd", "usermod"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("sshtest: %s not found: install passwd", tool)
		}
	}
	if opts.Sudo != SudoNone {
		if _, err := exec.LookPath("sudo"); err != nil {
			t.Fatal("sshtest: sudo not found: install sudo (apt-get install sudo)")
		}
	}
	var b [4]byte
	rand.Read(b[:])
	name := "rext" + hex.EncodeToString(b[:])
	home, err := os.MkdirTemp("", "sshtest-user")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(home, 0o755)
	run := func(stdin string, argv ...string) {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sshtest: %s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	run("", "useradd", "--no-create-home", "--home-dir", home, "--shell", "/bin/sh", "--user-group", name)
	u := &User{Name: name, Home: home, Password: opts.Password}
	sudoers := filepath.Join("/etc/sudoers.d", name)
	t.Cleanup(func() {
		os.Remove(sudoers)
		killUser(u.UID)
		exec.Command("userdel", name).Run()
		os.RemoveAll(filepath.Join("/run/sudo/ts", name))
		os.RemoveAll(home)
	})
	pu, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	u.UID, _ = strconv.Atoi(pu.Uid)
	u.GID, _ = strconv.Atoi(pu.Gid)
	if err := os.Chown(home, u.UID, u.GID); err != nil {
		t.Fatal(err)
	}
	if opts.Password != "" {
		run(name+":"+opts.Password+"\n", "chpasswd")
	} else {
		run("", "usermod", "--password", "*", name) // no password, not locked
	}
	var rule string
	switch opts.Sudo {
	case SudoPassword:
		rule = name + " ALL=(ALL:ALL) ALL\n"
	case SudoNoPasswd:
		rule = name + " ALL=(ALL:ALL) NOPASSWD: ALL\n"
	}
	if rule != "" {
		if err := os.MkdirAll("/etc/sudoers.d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sudoers, []byte(rule), 0o440); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("visudo", "-c", "-f", sudoers).CombinedOutput(); err != nil {
			t.Fatalf("sshtest: sudoers entry refused: %v: %s", err, out)
		}
	}
	return u
}

// killUser ends the processes still running as uid (what the test ran
// as that user, and sudo's children of it), by pid.
func killUser(uid int) {
	if uid <= 0 {
		return // never root's (or an unknown account's) processes
	}
	for range 50 { // bounded: 5 s
		var left []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(fmt.Sprintf("/proc/%d", pid), &st) == nil && int(st.Uid) == uid && processAlive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
