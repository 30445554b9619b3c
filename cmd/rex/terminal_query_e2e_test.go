//go:build linux

package main

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestFailureAsksTheTerminalNothing: a command that failed and said so
// itself (rex run's `local! exit 1`, an exit status carried up) ends
// without asking the terminal anything. fang styled every error it was
// given, printed or not, and on a terminal asked for the background
// colour (OSC 11, then DA1): the query was left in the output of every
// failed run, and a terminal that does not answer (script(1), a serial
// console) held rex for seconds. This pty answers nothing.
func TestFailureAsksTheTerminalNothing(t *testing.T) {
	e := newRexEnv(t, rexBin)
	for _, args := range [][]string{
		{"run", "local", "--", "false"},
		{"run", "local", "--", "exit 3"},
	} {
		cmd := e.cmd(args...)
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
		ptmx, err := pty.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		read := make(chan struct{})
		go func() {
			io.Copy(&out, ptmx) // until the pty closes (EIO once rex is gone)
			close(read)
		}()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var werr error
		select {
		case werr = <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Signal(syscall.SIGKILL)
			t.Fatalf("rex %s did not end", strings.Join(args, " "))
		}
		// All it wrote is read before the pty closes (EIO after the rest).
		select {
		case <-read:
		case <-time.After(time.Minute):
			t.Fatal("the pty never closed after rex ended")
		}
		ptmx.Close()
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() == 0 {
			t.Errorf("rex %s: %v, want its failure's exit status", strings.Join(args, " "), werr)
		}
		if got := out.String(); strings.Contains(got, "\x1b]11;?") || strings.Contains(got, "\x1b[c") {
			t.Errorf("rex %s asked the terminal: %q", strings.Join(args, " "), got)
		}
	}
}
