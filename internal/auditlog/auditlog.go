// Package auditlog appends JSON lines to an audit log: rexd's on each
// host, and rex's own on the operator's machine for the calls rex makes
// itself (an MCP tool over HTTP), which no rexd sees.
package auditlog

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Entry is one line of an audit log.
type Entry struct {
	Time       time.Time      `json:"time"`
	SessionID  string         `json:"session_id,omitempty"`
	ClientName string         `json:"client_name,omitempty"`
	Method     string         `json:"method,omitempty"`
	Event      string         `json:"event,omitempty"`
	Params     map[string]any `json:"params,omitempty"`
	Result     any            `json:"result,omitempty"`
	Error      *Error         `json:"error,omitempty"`
}

// Error is how a request failed.
type Error struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message"`
}

// Log appends one JSON object a line to a file opened O_APPEND, each in
// one write, so lines stay whole even with several writers.
type Log struct {
	mu sync.Mutex
	f  *os.File
}

// Open opens the log at path, creating it (mode 0600) and its directory
// (0700).
func Open(path string) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	return &Log{f: f}, nil
}

// Write appends e, stamped now. A nil Log (auditing off) writes nothing.
func (l *Log) Write(e Entry) error {
	if l == nil {
		return nil
	}
	e.Time = time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("write audit log %s: %w", l.f.Name(), err)
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.Write(b); err != nil { // one write per entry: O_APPEND keeps lines whole
		return fmt.Errorf("write audit log %s: %w", l.f.Name(), err)
	}
	return nil
}

// Stat describes the open log file (its identity stays that of the file
// being written, wherever its name goes).
func (l *Log) Stat() (fs.FileInfo, error) { return l.f.Stat() }

// Close closes the log.
func (l *Log) Close() error { return l.f.Close() }
