//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

// TestInterruptAtPasswordPromptRestoresEcho: a secret prompt turns the
// terminal's echo off; ctrl+c twice (or once and the exit grace) ends rex
// with os.Exit while the prompt still reads, and the operator's shell must
// not be left without echo. The prompt here is sudo's password for
// `local`, asked of a user that sudo does not let in without one.
func TestInterruptAtPasswordPromptRestoresEcho(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run rex as nobody, whose sudo asks a password")
	}
	// Both are in CI's packages (.ci/run: util-linux, sudo).
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("needs setpriv (util-linux)")
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		t.Fatal("needs sudo")
	}
	// Not t.TempDir: its parent is closed to other users.
	home, err := os.MkdirTemp("", "rex-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	for _, d := range []string{home, filepath.Dir(rexBin)} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", rexBin, "run", "--sudo", "local", "--", "true")
	cmd.Env = []string{"HOME=" + home, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"}
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	prompted := make(chan struct{})
	output := make(chan string, 1)
	go func() {
		var out bytes.Buffer
		defer func() { output <- out.String() }()
		buf := make([]byte, 4096)
		said := false
		for {
			n, err := ptmx.Read(buf)
			out.Write(buf[:n])
			if !said && bytes.Contains(out.Bytes(), []byte("password")) {
				said = true
				close(prompted)
			}
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-prompted:
	case err := <-exited:
		t.Fatalf("rex ended before asking a password (sudo lets nobody in?): %v\n%s", err, <-output)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no password prompt within 60 s")
	}
	// The prompt is written before its read turns echo off, and nothing
	// tells when that happens: the terminal's mode is polled, for at most
	// 10 s.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(int(ptmx.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if tio.Lflag&unix.ECHO == 0 {
			break
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("the password prompt did not turn echo off within 10 s")
		case err := <-exited:
			t.Fatalf("rex ended at the password prompt before turning echo off: %v\n%s", err, <-output)
		}
	}
	ptmx.Write([]byte{3, 3}) // ctrl+c twice (the kernel may merge them: then the exit grace ends it)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("rex did not end after two ctrl+c")
	}
	tio, err := unix.IoctlGetTermios(int(ptmx.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if tio.Lflag&unix.ECHO == 0 {
		t.Error("rex exited at a password prompt and left the terminal without echo; the shell after it shows nothing typed")
	}
}
