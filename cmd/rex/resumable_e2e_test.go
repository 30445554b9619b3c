package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// dropSSH ends every SSH connection to s (its connection handlers get
// SIGTERM), as a network that went away does for the client.
func dropSSH(t *testing.T, s *sshtest.Server) {
	t.Helper()
	n := 0
	for _, pid := range s.Descendants() {
		if comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(comm)) == "sshd" {
			if syscall.Kill(pid, syscall.SIGTERM) == nil {
				n++
			}
		}
	}
	if n == 0 {
		t.Fatalf("no connection of %s to drop", s.Addr)
	}
}

// runThroughADrop runs a 40-line loop on h1 with args, drops h1's SSH
// connection once line-5 is out, and returns stdout, stderr and the exit
// status.
func runThroughADrop(t *testing.T, f *sshFleet, args ...string) (string, string, int) {
	t.Helper()
	loop := `i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo line-$i; sleep 0.1; done`
	cmd := f.cmd(append(append([]string{"run", "h1"}, args...), "--", loop)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(pipe)
	dropped := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !dropped && sc.Text() == "h1: line-5" {
			dropSSH(t, f.hosts[0])
			dropped = true
		}
	}
	err = cmd.Wait()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if !dropped {
		t.Fatalf("line-5 never came:\n%s\n%s", out.String(), errOut.String())
	}
	return out.String(), errOut.String(), code
}

// TestRunResumable: rex run keeps REXD v1's rule (a dropped connection
// stops the command and the target is unreachable) unless --resumable,
// with which the connection is made again and the command's output goes
// on with every line exactly once.
func TestRunResumable(t *testing.T) {
	f := newSSHFleet(t, 1, false)

	out, errOut, code := runThroughADrop(t, f, "--resumable")
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "h1: line-%d\n", i)
	}
	if code != 0 || out != want.String() {
		t.Fatalf("--resumable through a drop: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, errOut, code = runThroughADrop(t, f)
	if code != 255 || !strings.Contains(errOut, "connection lost") || strings.Contains(out, "line-40") {
		t.Fatalf("without --resumable through a drop: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
