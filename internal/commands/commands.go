// Package commands implements rex's verbs once for both front ends: the
// command line (cmd/rex) and the console's slash commands (tui). A verb takes
// its arguments and an IO and returns an error; the same words reach the
// operator in a shell and in the console.
package commands

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// IO is where a verb reads and writes.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
	// Styled is true when Out is a terminal: tables and colour are welcome.
	// Piped output stays plain text.
	Styled bool
	// Lock, when set, is held while output is written and while the
	// operator is asked something (a passphrase, a host key), so a prompt
	// never lands inside output.
	Lock *sync.Mutex
}

func (o IO) lock() {
	if o.Lock != nil {
		o.Lock.Lock()
	}
}

func (o IO) unlock() {
	if o.Lock != nil {
		o.Lock.Unlock()
	}
}

// isTerminal reports whether r is a terminal.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ExitError asks the front end to end with a specific status. Its message,
// when not empty, has already been printed or is printed by the front end.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is an operator's mistake in how a verb was called.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef builds a UsageError.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// ExitCode maps a verb's error to a process exit status: 0 for nil, the
// carried code for an ExitError, 2 for a usage error, 1 otherwise.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}
