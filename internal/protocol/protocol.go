// Package protocol holds the REXD v1 wire types: JSON-RPC 2.0 envelopes, the
// params and results of every method, the events, the error codes and the
// newline-delimited JSON codec. Both rexd and its clients import it; it
// imports nothing of either.
package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Version is the protocol identifier returned by session.open.
const Version = "rexd/1"

// JSONRPC is the only accepted value of the "jsonrpc" member.
const JSONRPC = "2.0"

// FirstEnv names the environment variable in which whoever starts rexd
// --stdio may hand it its first requests: base64 of their lines, read
// before standard input. OpenSSH opens a session channel's window only
// once the command runs, so requests written to the input wait a round
// trip for it; these ride in the exec request. rexd removes the variable
// from its environment before it starts anything.
const FirstEnv = "REXD_FIRST"

// Method names of REXD v1 and its PTY extension.
const (
	MethodSessionOpen  = "session.open"
	MethodSessionClose = "session.close"
	MethodSessionInfo  = "session.info"

	MethodExecStart = "exec.start"
	MethodExecWait  = "exec.wait"
	MethodExecKill  = "exec.kill"
	MethodExecInput = "exec.input"

	MethodFSRead  = "fs.read"
	MethodFSWrite = "fs.write"
	MethodFSList  = "fs.list"
	MethodFSGlob  = "fs.glob"
	MethodFSStat  = "fs.stat"

	MethodPTYOpen   = "pty.open"
	MethodPTYInput  = "pty.input"
	MethodPTYResize = "pty.resize"
	MethodPTYClose  = "pty.close"

	// MethodCancelRequest is a notification from the client, as in LSP:
	// stop working on the request whose id is params.id. The request is
	// still answered, with request_cancelled unless it had finished.
	MethodCancelRequest = "$/cancelRequest"
)

// CancelParams are the params of $/cancelRequest.
type CancelParams struct {
	ID json.RawMessage `json:"id"`
}

// Event (notification) method names.
const (
	EventExecStdout = "exec.stdout"
	EventExecStderr = "exec.stderr"
	EventExecExit   = "exec.exit"
	EventExecError  = "exec.error"
	EventPTYOutput  = "pty.output"
	EventPTYExit    = "pty.exit"
)

// Capabilities announced by session.open.
const (
	CapExec      = "exec"
	CapFS        = "fs"
	CapEvents    = "events"
	CapExecInput = "exec.input"
	CapPTY       = "pty"
	CapCancel    = "cancel" // $/cancelRequest is honoured
	// CapPipeline: exec.start may name its session by the id of the
	// session.open request that opened it (session_open_id), so a client
	// sends both at once, and session.open takes build_hashes.
	CapPipeline = "pipeline"
)

// Message is one JSON-RPC 2.0 object on the wire: a request (ID and Method),
// a notification (Method, no ID) or a response (ID and Result or Error).
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// IsRequest reports whether m expects a response.
func (m *Message) IsRequest() bool { return m.Method != "" && len(m.ID) > 0 }

// IsNotification reports whether m is an event.
func (m *Message) IsNotification() bool { return m.Method != "" && len(m.ID) == 0 }

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// marshal encodes v without HTML escaping: payloads stay readable and
// smaller, and "<" in a command's output is not rewritten.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// NullID returns the JSON null id used when a request's id is unknown.
func NullID() json.RawMessage { return json.RawMessage("null") }

// NewResponse builds a successful response carrying result.
func NewResponse(id json.RawMessage, result any) (*Message, error) {
	raw, err := marshal(result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return &Message{JSONRPC: JSONRPC, ID: id, Result: raw}, nil
}

// NewErrorResponse builds an error response. A nil id becomes null.
func NewErrorResponse(id json.RawMessage, e *Error) *Message {
	if len(id) == 0 {
		id = NullID()
	}
	return &Message{JSONRPC: JSONRPC, ID: id, Error: e}
}

// NewNotification builds an event.
func NewNotification(method string, params any) (*Message, error) {
	raw, err := marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s params: %w", method, err)
	}
	return &Message{JSONRPC: JSONRPC, Method: method, Params: raw}, nil
}

// NewRequest builds a request.
func NewRequest(id int64, method string, params any) (*Message, error) {
	raw, err := marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s params: %w", method, err)
	}
	return &Message{JSONRPC: JSONRPC, ID: json.RawMessage(fmt.Sprint(id)), Method: method, Params: raw}, nil
}
