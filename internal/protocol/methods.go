package protocol

import (
	"encoding/json"
	"time"
)

// Encodings of byte payloads. Text that is valid UTF-8 travels as utf8;
// anything else as base64.
const (
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
)

// Limits are the server's or a session's ceilings. A zero timeout or output
// cap in a server configuration means "none"; a request may only lower them.
type Limits struct {
	DefaultTimeoutMS       int64 `json:"default_timeout_ms"`
	HardTimeoutMS          int64 `json:"hard_timeout_ms"`
	MaxOutputBytes         int64 `json:"max_output_bytes"`
	MaxFileReadBytes       int64 `json:"max_file_read_bytes"`
	MaxProcessesPerSession int64 `json:"max_processes_per_session"`
	MaxConcurrentSessions  int64 `json:"max_concurrent_sessions"`
	// MaxProcessesPerUser bounds the processes and terminals of the user
	// on the host, across all of the user's rexd processes (detached
	// processes of closed sessions included).
	MaxProcessesPerUser int64 `json:"max_processes_per_user,omitempty"`
}

// LimitsOverride lowers a session's limits; zero fields keep the server's.
type LimitsOverride struct {
	DefaultTimeoutMS       int64 `json:"default_timeout_ms,omitempty"`
	HardTimeoutMS          int64 `json:"hard_timeout_ms,omitempty"`
	MaxOutputBytes         int64 `json:"max_output_bytes,omitempty"`
	MaxFileReadBytes       int64 `json:"max_file_read_bytes,omitempty"`
	MaxProcessesPerSession int64 `json:"max_processes_per_session,omitempty"`
}

// SessionOpenParams are the params of session.open.
type SessionOpenParams struct {
	ClientName            string          `json:"client_name"`
	ClientVersion         string          `json:"client_version,omitempty"`
	WorkspaceRoots        []string        `json:"workspace_roots,omitempty"`
	RequestedCapabilities []string        `json:"requested_capabilities,omitempty"`
	Limits                *LimitsOverride `json:"limits,omitempty"`
	// ResumeGraceMS asks for a resumable session (capability
	// session.resume): how long rexd keeps it after its connection drops.
	// rexd may grant less (its resume_grace_ms limit).
	ResumeGraceMS int64 `json:"resume_grace_ms,omitempty"`
	// BuildHashes, when set, opens the session only on a rexd whose build
	// hash is one of them (capability pipeline): a client that sent work
	// behind session.open before learning which rexd answers knows that
	// nothing ran on a rexd it did not want.
	BuildHashes []string `json:"build_hashes,omitempty"`
}

// SessionOpenResult is the result of session.open.
type SessionOpenResult struct {
	SessionID      string   `json:"session_id"`
	Protocol       string   `json:"protocol"`
	ServerVersion  string   `json:"server_version"`
	BuildHash      string   `json:"build_hash,omitempty"`
	Capabilities   []string `json:"capabilities"`
	Limits         Limits   `json:"limits"`
	WorkspaceRoots []string `json:"workspace_roots"`
	Cwd            string   `json:"cwd"`
	Platform       string   `json:"platform,omitempty"`
	Hostname       string   `json:"hostname,omitempty"`
	// Resumable sessions: the grace granted and the secret that
	// session.resume must present. ResumeError says why a session asked
	// for as resumable is not (it then works as a plain one).
	ResumeGraceMS int64  `json:"resume_grace_ms,omitempty"`
	ResumeToken   string `json:"resume_token,omitempty"`
	ResumeError   string `json:"resume_error,omitempty"`
}

// SessionRef names a session; the params of session.close and session.info.
type SessionRef struct {
	SessionID string `json:"session_id"`
}

// SessionCloseResult is the result of session.close.
type SessionCloseResult struct {
	OK                bool `json:"ok"`
	ProcessesKilled   int  `json:"processes_killed"`
	ProcessesDetached int  `json:"processes_detached"`
}

// ProcessInfo describes one live process of a session.
type ProcessInfo struct {
	ProcessID string    `json:"process_id"`
	PTYID     string    `json:"pty_id,omitempty"`
	Argv      []string  `json:"argv"`
	Pid       int       `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	Status    string    `json:"status"`
	Detached  bool      `json:"detached,omitempty"`
}

// SessionInfoResult is the result of session.info.
type SessionInfoResult struct {
	SessionID      string        `json:"session_id"`
	ClientName     string        `json:"client_name"`
	Cwd            string        `json:"cwd"`
	WorkspaceRoots []string      `json:"workspace_roots"`
	Limits         Limits        `json:"limits"`
	Capabilities   []string      `json:"capabilities"`
	Processes      []ProcessInfo `json:"processes"`
	OpenedAt       time.Time     `json:"opened_at"`
}

// ExecStartParams are the params of exec.start. Stdin, when present, is
// written to the process and then closed; when absent, stdin stays open for
// exec.input.
type ExecStartParams struct {
	SessionID string `json:"session_id,omitempty"`
	// SessionOpenID names the session instead of SessionID (capability
	// pipeline): the one opened by the session.open request with this
	// JSON-RPC id, earlier on the same connection.
	SessionOpenID  json.RawMessage   `json:"session_open_id,omitempty"`
	Argv           []string          `json:"argv,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Stdin          *string           `json:"stdin,omitempty"`
	StdinEncoding  string            `json:"stdin_encoding,omitempty"`
	TimeoutMS      int64             `json:"timeout_ms,omitempty"`
	MaxOutputBytes int64             `json:"max_output_bytes,omitempty"`
	Shell          bool              `json:"shell,omitempty"`
	Command        string            `json:"command,omitempty"`
	Detach         bool              `json:"detach,omitempty"`
}

// ExecStartResult is the result of exec.start.
type ExecStartResult struct {
	ProcessID string    `json:"process_id"`
	StartedAt time.Time `json:"started_at"`
	Pid       int       `json:"pid,omitempty"`
}

// Process states reported by exec.wait.
const (
	StatusRunning  = "running"
	StatusExited   = "exited"
	StatusKilled   = "killed"
	StatusTimedOut = "timed_out"
)

// ExecWaitParams are the params of exec.wait. Without timeout_ms it waits
// until the process ends; with it, it answers "running" when time is up.
type ExecWaitParams struct {
	SessionID string `json:"session_id"`
	ProcessID string `json:"process_id"`
	TimeoutMS *int64 `json:"timeout_ms,omitempty"`
}

// ExecWaitResult is the result of exec.wait.
type ExecWaitResult struct {
	Status              string  `json:"status"`
	ExitCode            *int    `json:"exit_code"`
	Signal              *string `json:"signal"`
	BytesStdout         int64   `json:"bytes_stdout"`
	BytesStderr         int64   `json:"bytes_stderr"`
	OutputLimitExceeded bool    `json:"output_limit_exceeded,omitempty"`
}

// ExecKillParams are the params of exec.kill.
type ExecKillParams struct {
	SessionID string `json:"session_id"`
	ProcessID string `json:"process_id"`
	Signal    string `json:"signal,omitempty"`
}

// OKResult is the result of methods that only succeed or fail.
type OKResult struct {
	OK bool `json:"ok"`
}

// ExecInputParams are the params of exec.input.
type ExecInputParams struct {
	SessionID string `json:"session_id"`
	ProcessID string `json:"process_id"`
	Data      string `json:"data"`
	Encoding  string `json:"encoding,omitempty"`
	EOF       bool   `json:"eof,omitempty"`
}

// ExecInputResult is the result of exec.input.
type ExecInputResult struct {
	AcceptedBytes int `json:"accepted_bytes"`
}

// FSReadParams are the params of fs.read.
type FSReadParams struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
	Offset    int64  `json:"offset,omitempty"`
	Length    *int64 `json:"length,omitempty"`
	Encoding  string `json:"encoding,omitempty"`
}

// FSReadResult is the result of fs.read. Encoding may be base64 even when
// utf8 was asked for: bytes that are not valid UTF-8 never travel as text.
type FSReadResult struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Mtime     string `json:"mtime"`
	Encoding  string `json:"encoding"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"`
}

// Write modes of fs.write.
const (
	WriteCreate  = "create"
	WriteReplace = "replace"
	WriteAppend  = "append"
)

// FSWriteParams are the params of fs.write.
type FSWriteParams struct {
	SessionID     string `json:"session_id"`
	Path          string `json:"path"`
	Content       string `json:"content"`
	Encoding      string `json:"encoding,omitempty"`
	Mode          string `json:"mode,omitempty"`
	MkdirParents  bool   `json:"mkdir_parents,omitempty"`
	Atomic        *bool  `json:"atomic,omitempty"`
	ExpectedMtime string `json:"expected_mtime,omitempty"`
	Perm          string `json:"perm,omitempty"`
}

// FSWriteResult is the result of fs.write.
type FSWriteResult struct {
	Path         string `json:"path"`
	BytesWritten int64  `json:"bytes_written"`
	Mtime        string `json:"mtime"`
	Created      bool   `json:"created"`
}

// File types reported by fs.list and fs.stat.
const (
	TypeFile    = "file"
	TypeDir     = "dir"
	TypeSymlink = "symlink"
	TypeOther   = "other"
)

// FSListParams are the params of fs.list.
type FSListParams struct {
	SessionID  string `json:"session_id"`
	Path       string `json:"path"`
	Recursive  bool   `json:"recursive,omitempty"`
	MaxEntries int    `json:"max_entries,omitempty"`
}

// FSEntry is one entry of fs.list.
type FSEntry struct {
	Name  string  `json:"name"`
	Path  string  `json:"path"`
	Type  string  `json:"type"`
	Size  *int64  `json:"size"`
	Mtime *string `json:"mtime"`
}

// FSListResult is the result of fs.list.
type FSListResult struct {
	Path      string    `json:"path"`
	Entries   []FSEntry `json:"entries"`
	Truncated bool      `json:"truncated,omitempty"`
}

// FSGlobParams are the params of fs.glob. Patterns use path.Match syntax per
// segment plus "**" for any number of segments.
type FSGlobParams struct {
	SessionID  string `json:"session_id"`
	Pattern    string `json:"pattern"`
	Cwd        string `json:"cwd,omitempty"`
	MaxMatches int    `json:"max_matches,omitempty"`
}

// FSGlobResult is the result of fs.glob.
type FSGlobResult struct {
	Matches   []string `json:"matches"`
	Truncated bool     `json:"truncated,omitempty"`
}

// FSStatParams are the params of fs.stat.
type FSStatParams struct {
	SessionID string `json:"session_id"`
	Path      string `json:"path"`
}

// FSStatResult is the result of fs.stat. A missing path is not an error:
// exists is false and the other fields are empty.
type FSStatResult struct {
	Path          string `json:"path"`
	Exists        bool   `json:"exists"`
	Type          string `json:"type,omitempty"`
	Size          int64  `json:"size"`
	Mtime         string `json:"mtime,omitempty"`
	Mode          string `json:"mode,omitempty"`
	UID           *int   `json:"uid,omitempty"`
	GID           *int   `json:"gid,omitempty"`
	SymlinkTarget string `json:"symlink_target,omitempty"`
}

// PTYOpenParams are the params of pty.open. With neither argv nor command
// the user's login shell runs.
type PTYOpenParams struct {
	SessionID string            `json:"session_id"`
	Argv      []string          `json:"argv,omitempty"`
	Shell     bool              `json:"shell,omitempty"`
	Command   string            `json:"command,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Cols      int               `json:"cols,omitempty"`
	Rows      int               `json:"rows,omitempty"`
	Term      string            `json:"term,omitempty"`
}

// PTYOpenResult is the result of pty.open.
type PTYOpenResult struct {
	PTYID     string    `json:"pty_id"`
	ProcessID string    `json:"process_id"`
	Pid       int       `json:"pid,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// PTYInputParams are the params of pty.input.
type PTYInputParams struct {
	SessionID string `json:"session_id"`
	PTYID     string `json:"pty_id"`
	Data      string `json:"data"`
	Encoding  string `json:"encoding,omitempty"`
}

// PTYResizeParams are the params of pty.resize.
type PTYResizeParams struct {
	SessionID string `json:"session_id"`
	PTYID     string `json:"pty_id"`
	Cols      int    `json:"cols"`
	Rows      int    `json:"rows"`
}

// PTYCloseParams are the params of pty.close.
type PTYCloseParams struct {
	SessionID string `json:"session_id"`
	PTYID     string `json:"pty_id"`
}

// Default terminal settings of pty.open.
const (
	DefaultTerm = "xterm-256color"
	DefaultCols = 80
	DefaultRows = 24
)
