package commands

import (
	"sync"

	"golang.org/x/term"
)

// echoOff holds the terminal state of every secret prompt still reading,
// by file descriptor: term.ReadPassword turns echo off and restores it
// only when the read returns.
var echoOff struct {
	sync.Mutex
	states map[int]*term.State
}

// readPassword is term.ReadPassword on fd, with the terminal's state kept
// so that RestoreTerminal can put it back if rex exits in the middle.
func readPassword(fd int) ([]byte, error) {
	if st, err := term.GetState(fd); err == nil {
		echoOff.Lock()
		if echoOff.states == nil {
			echoOff.states = map[int]*term.State{}
		}
		echoOff.states[fd] = st
		echoOff.Unlock()
		defer func() {
			echoOff.Lock()
			delete(echoOff.states, fd)
			echoOff.Unlock()
		}()
	}
	return term.ReadPassword(fd)
}

// RestoreTerminal puts back the terminal state a secret prompt changed
// (echo off) while it still reads; call it before exiting at once (a
// second ctrl+c), or the operator's shell is left without echo.
func RestoreTerminal() {
	echoOff.Lock()
	defer echoOff.Unlock()
	for fd, st := range echoOff.states {
		_ = term.Restore(fd, st)
	}
}
