package rexd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// auditLog appends one JSON object per request (and per process exit) to a
// file. Contents, input, stdin and environment values are never written.
type auditLog struct {
	mu sync.Mutex
	f  *os.File
}

type auditError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type auditEntry struct {
	Time       time.Time      `json:"time"`
	SessionID  string         `json:"session_id,omitempty"`
	ClientName string         `json:"client_name,omitempty"`
	Method     string         `json:"method,omitempty"`
	Event      string         `json:"event,omitempty"`
	Params     map[string]any `json:"params,omitempty"`
	Result     any            `json:"result,omitempty"`
	Error      *auditError    `json:"error,omitempty"`
}

func openAudit(path string) (*auditLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log %s: %w", path, err)
	}
	return &auditLog{f: f}, nil
}

func (a *auditLog) write(e auditEntry) {
	if a == nil {
		return
	}
	e.Time = time.Now().UTC()
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	a.f.Write(b) // one write per entry: O_APPEND keeps lines whole
}

func (a *auditLog) close() error { return a.f.Close() }

// isSecret reports whether a param's value must never reach the audit log.
// Keys are compared as encoding/json matches them to fields, ignoring case
// (with Unicode folding: "Stdin" and "ſtdin" are stdin to the handler).
func isSecret(key string) bool {
	for _, k := range []string{"content", "data", "stdin", "entries", "resume_token"} {
		if strings.EqualFold(key, k) {
			return true
		}
	}
	return false
}

// redactParams normalises a request's params for the audit log: payloads
// become their size, environment values are hidden, the rest is kept.
func redactParams(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return map[string]any{"unparsed_bytes": len(raw)}
	}
	for k, v := range m {
		switch {
		case isSecret(k):
			if s, ok := v.(string); ok {
				m[k] = fmt.Sprintf("<redacted %d bytes>", len(s))
			} else {
				m[k] = "<redacted>"
			}
		case strings.EqualFold(k, "env"):
			if env, ok := v.(map[string]any); ok {
				for ek := range env {
					env[ek] = "<redacted>"
				}
			}
		}
	}
	return m
}

// summarize keeps what an auditor needs of a result, not the payload.
func summarize(res any) any {
	switch r := res.(type) {
	case protocol.FSReadResult:
		return map[string]any{"path": r.Path, "size": r.Size, "bytes": len(r.Content), "truncated": r.Truncated}
	case protocol.FSWriteResult:
		return r
	case protocol.FSListResult:
		return map[string]any{"path": r.Path, "entries": len(r.Entries)}
	case protocol.FSGlobResult:
		return map[string]any{"matches": len(r.Matches)}
	case protocol.SessionOpenResult:
		r.ResumeToken = "" // a secret: only the client holds it
		return r
	case protocol.SessionInfoResult:
		return map[string]any{"processes": len(r.Processes)}
	case interface{ auditSummary() any }: // cas results: counts, never contents
		return r.auditSummary()
	default:
		return res
	}
}
