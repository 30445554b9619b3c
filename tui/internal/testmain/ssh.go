package main

import (
	"os"
	"path/filepath"
	"runtime"

	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/payload"
	"github.com/rexconsole/rex/internal/sshx"
	"github.com/rexconsole/rex/tui"
)

// newDialer is SSH for the console: the rexd beside this binary (a test
// or development build) or the embedded builds, progress reported to the
// sidebar, and no terminal prompts or stderr output, which would tear
// through the console's screen (an encrypted key must be in ssh-agent).
func newDialer(states *tui.ConnStates) *sshx.Dialer {
	var sources []payload.Source
	if exe, err := os.Executable(); err == nil {
		sources = append(sources, payload.File(runtime.GOOS, runtime.GOARCH, filepath.Join(filepath.Dir(exe), "rexd")))
	}
	sources = append(sources, payload.Embedded())
	return sshx.NewDialer(sshx.Options{
		Payload:  payload.Chain(sources...),
		RexdArgs: fanout.OperatorLimits(),
		OnState:  states.Report,
	})
}
