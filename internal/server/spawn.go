package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// readyEnv names the descriptor on which a server started by Spawn says
// that it listens ("ready") or why it could not (one line).
const readyEnv = "REX_SERVER_READY_FD"

// spawnWait bounds how long Spawn waits for the server to listen.
const spawnWait = 30 * time.Second

// Spawn starts the server (`exe args...`, which calls Ready) detached
// from this terminal: a session of its own, stdin and stdout on
// /dev/null, stderr appended to logPath. It returns once the server
// listens, or with what it said when it could not.
func Spawn(ctx context.Context, exe string, args, env []string, logPath string) (int, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return 0, fmt.Errorf("start the rex server: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return 0, fmt.Errorf("start the rex server: %w", err)
	}
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, fmt.Errorf("start the rex server: %w", err)
	}
	defer null.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, fmt.Errorf("start the rex server: %w", err)
	}
	defer pr.Close()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(env, readyEnv+"=3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	dir, _ := os.UserHomeDir()
	if wd, err := os.Getwd(); err == nil {
		dir = wd // until a client says its own (AttachParams.Dir)
	}
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		pw.Close()
		return 0, fmt.Errorf("start the rex server: %w", err)
	}
	pw.Close()
	pid := cmd.Process.Pid
	// Not waited for: it outlives this process. Release lets go of it.
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(pr).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	t := time.NewTimer(spawnWait)
	defer t.Stop()
	select {
	case s := <-line:
		switch {
		case s == "ready":
			return pid, nil
		case s == "":
			err := <-exited
			return 0, fmt.Errorf("the rex server ended as it started (%v); see %s", err, logPath)
		}
		return 0, errors.New(s)
	case <-t.C:
		return 0, fmt.Errorf("the rex server (pid %d) did not start listening within %s; see %s", pid, spawnWait, logPath)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Ready tells the rex that spawned this server that it listens (err nil)
// or why it cannot, in one line. It does nothing in a server that was not
// spawned.
func Ready(err error) {
	if os.Getenv(readyEnv) != "3" {
		return
	}
	f := os.NewFile(3, "ready")
	if f == nil {
		return
	}
	defer f.Close()
	os.Unsetenv(readyEnv) // not for the console's children
	if err != nil {
		fmt.Fprintln(f, strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	fmt.Fprintln(f, "ready")
}
