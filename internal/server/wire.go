// Package server is rex's per-user server: where its socket lives and how
// that directory and every peer are checked, the wire between the server
// and its clients (JSON-RPC 2.0 over a Unix socket, one object per line,
// with internal/protocol's codec), the server's accept loop, and the
// client that `rex`, `rex ls`, `rex server stop` and `rex mcp` use.
//
// What the server serves is a Console (the console's engine, package
// tui): the wire carries attach, status, target and stop, and while a
// client is attached, its terminal's bytes both ways.
package server

import (
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// Wire is the revision of the methods below. A client refuses a server of
// another revision (or another rex version).
const Wire = 1

// Methods. Input, Resize, Output and Detached are notifications.
const (
	MethodHello  = "server.hello"
	MethodStatus = "server.status"
	MethodTarget = "server.target"
	MethodStop   = "server.stop"

	MethodAttach   = "console.attach"
	MethodInput    = "console.input"
	MethodResize   = "console.resize"
	MethodOutput   = "console.output"
	MethodDetached = "console.detached"
)

// CodeBusy refuses server.stop while work runs; the data is the Status.
const CodeBusy = -32020

// HelloParams introduce a client.
type HelloParams struct {
	Version string `json:"version"`
	Wire    int    `json:"wire"`
	Client  string `json:"client,omitempty"`
}

// HelloResult introduces the server.
type HelloResult struct {
	Version   string    `json:"version"`
	Wire      int       `json:"wire"`
	Pid       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
}

// Status is what runs in the server (server.status, rex ls).
type Status struct {
	Pid       int       `json:"pid"`
	Version   string    `json:"version"`
	StartedAt time.Time `json:"started_at"`
	// Target is the console's current target.
	Target  string `json:"target"`
	Clients int    `json:"clients"`
	// Tasks are the tasks that run; Finished counts the others kept.
	Tasks     []TaskStatus     `json:"tasks"`
	Finished  int              `json:"finished"`
	Terminals []TerminalStatus `json:"terminals"`
	// Connections are the targets reached, with what the last contact
	// said (ready, reconnecting…).
	Connections []ConnStatus `json:"connections"`
	// Agent is the agent's turn in progress, "" when none.
	Agent string `json:"agent,omitempty"`
}

// Busy reports whether stopping the server would stop work.
func (s Status) Busy() bool { return len(s.Tasks) > 0 || len(s.Terminals) > 0 || s.Agent != "" }

// TaskStatus is one running task.
type TaskStatus struct {
	Command string    `json:"command"`
	Targets []string  `json:"targets"`
	Running int       `json:"running"` // targets still running it
	Since   time.Time `json:"since"`
}

// TerminalStatus is one open terminal pane.
type TerminalStatus struct {
	Target  string `json:"target"`
	Command string `json:"command"`
}

// ConnStatus is one target reached this session.
type ConnStatus struct {
	Target string `json:"target"`
	State  string `json:"state"`
}

// TargetResult is the console's current target.
type TargetResult struct {
	Target string `json:"target"`
}

// StopParams ask the server to stop; without Force it refuses while work
// runs (CodeBusy).
type StopParams struct {
	Force bool `json:"force,omitempty"`
}

// AttachParams describe the client's terminal.
type AttachParams struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
	// Env is the client's terminal environment (TERM, COLORTERM, …),
	// which decides how its frames are drawn.
	Env []string `json:"env,omitempty"`
	// Profile is the client's colour profile (colorprofile.Profile's
	// name); empty lets the server work it out from Env.
	Profile string `json:"profile,omitempty"`
	// Dir is the client's working directory: relative local paths of
	// /push and /pull typed there start in it, not where the server was
	// started. Empty keeps the server's.
	Dir string `json:"dir,omitempty"`
}

// DataParams carry terminal bytes (console.input, console.output).
type DataParams struct {
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
}

// Bytes decodes the payload.
func (d DataParams) Bytes() ([]byte, error) { return protocol.DecodeData(d.Data, d.Encoding) }

// NewData encodes b.
func NewData(b []byte) DataParams {
	d, enc := protocol.EncodeData(b)
	return DataParams{Data: d, Encoding: enc}
}

// ResizeParams are the client's new window size.
type ResizeParams struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// Detach is how an attachment ended: Reason in one sentence, Quit when
// the console itself ended.
type Detach struct {
	Reason string `json:"reason"`
	Quit   bool   `json:"quit,omitempty"`
	// Gone: the console had quit before this client could attach (a rex
	// meeting a server on its way out): start a fresh one.
	Gone bool `json:"gone,omitempty"`
}
