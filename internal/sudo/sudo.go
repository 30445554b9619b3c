// Package sudo starts a program through sudo(8) for rex (a target's rexd
// when the operator asks for --sudo or a device says "become"): the
// command line, and the handshake that gives sudo the password only when
// it asks for one and tells when the program is running. The password
// travels only to sudo's standard input; nothing here keeps or prints it.
package sudo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

// Prompt is what sudo is told to print when it wants the password (-p):
// rex watches sudo's standard error for it. It holds no '%', which sudo
// would expand.
const Prompt = "[rex-sudo-password]"

// Ready is the line the program's wrapper prints on standard output once
// sudo has let it run, before the program starts.
const Ready = "rexd-become-ok"

// ReadyScript is run by sudo under /bin/sh: say Ready, then become the
// program ($0) with its arguments.
const ReadyScript = `echo ` + Ready + `; exec "$0" "$@"`

// Mode is sudo's flag for how to get a password: -n (never ask, fail)
// without one, -S (read it from standard input when wanted) with one.
func Mode(password bool) string {
	if password {
		return "-S"
	}
	return "-n"
}

// Args returns the arguments of sudo that run argv as user (see Mode).
// HOME becomes the user's home (-H), so the program's caches and logs are
// the user's own.
func Args(user string, password bool, argv ...string) []string {
	return append([]string{Mode(password), "-H", "-p", Prompt, "-u", user, "--", "/bin/sh", "-c", ReadyScript}, argv...)
}

// Errors of the handshake.
var (
	// ErrPasswordRequired: sudo -n refused because it wants a password;
	// start again with one.
	ErrPasswordRequired = errors.New("sudo wants a password")
	// ErrWrongPassword: sudo asked again after the password was given.
	ErrWrongPassword = errors.New("sudo refused the password")
	// ErrNotStarted: the output ended before sudo ran anything (the
	// program was not there, or the shell failed before sudo).
	ErrNotStarted = errors.New("the program did not start")
	// ErrEnded: the output ended before Ready. Wait for the process to
	// end (so all it wrote on stderr is seen), then ask Watcher.Failure
	// why.
	ErrEnded = errors.New("the output ended before the program ran")
)

// RefusedError is sudo saying no for another reason than the password
// (not in sudoers, not allowed to run the program, no sudo at all).
type RefusedError struct{ Said string }

func (e *RefusedError) Error() string { return "sudo refused: " + e.Said }

// Watcher sees sudo's standard error: it notices each password prompt
// and keeps the rest (what sudo said) for errors. Use it as (or beside)
// the process's stderr writer.
type Watcher struct {
	mu      sync.Mutex
	buf     []byte // unmatched tail and what sudo said, bounded
	prompts chan struct{}
}

// NewWatcher returns a Watcher.
func NewWatcher() *Watcher { return &Watcher{prompts: make(chan struct{}, 4)} }

// Write implements io.Writer.
func (w *Watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.Index(w.buf, []byte(Prompt))
		if i < 0 {
			break
		}
		w.buf = append(w.buf[:i], w.buf[i+len(Prompt):]...)
		select {
		case w.prompts <- struct{}{}:
		default:
		}
	}
	if over := len(w.buf) - 4096; over > 0 {
		w.buf = w.buf[over:]
	}
	return len(p), nil
}

// Said is what sudo (or the shell) wrote on standard error, prompts left
// out, in one line.
func (w *Watcher) Said() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(strings.Fields(string(w.buf)), " ")
}

// Wait runs the handshake: it reads lines with next (each line of the
// program's standard output, until Ready) and gives password to in when
// the watcher sees sudo ask for it. It returns nil once the program runs;
// the caller then speaks to it on the same streams. On an error the caller
// ends the process: that is also what stops a sudo waiting for a second
// password.
func Wait(ctx context.Context, next func() (string, error), w *Watcher, in io.Writer, password []byte) error {
	lines := make(chan error, 1)
	go func() {
		for {
			l, err := next()
			if err != nil {
				lines <- err
				return
			}
			if strings.TrimRight(l, "\r\n") == Ready {
				lines <- nil
				return
			}
		}
	}()
	asked := 0
	for {
		select {
		case err := <-lines:
			if err == nil {
				return nil
			}
			return ErrEnded
		case <-w.prompts:
			asked++
			if asked > 1 || password == nil {
				return ErrWrongPassword
			}
			msg := append(append([]byte{}, password...), '\n')
			_, err := in.Write(msg)
			clear(msg)
			if err != nil {
				return fmt.Errorf("give sudo the password: %w", err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Failure says why the output ended before the program ran, from what
// sudo (or the shell) wrote on stderr: call it once the process has ended.
func (w *Watcher) Failure() error {
	said := w.Said()
	switch {
	case said == "":
		return ErrNotStarted
	case strings.Contains(said, "password is required"):
		return ErrPasswordRequired
	case strings.Contains(said, "incorrect password"), strings.Contains(said, "Sorry, try again"):
		return ErrWrongPassword
	case strings.Contains(said, "sudo: not found"), strings.Contains(said, "sudo: command not found"), strings.Contains(said, "sudo: No such file"):
		return &RefusedError{Said: "sudo is not installed"}
	case strings.Contains(said, "sudo"):
		return &RefusedError{Said: said}
	}
	return ErrNotStarted
}
