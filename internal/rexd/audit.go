package rexd

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rexconsole/rex/internal/auditlog"
	"github.com/rexconsole/rex/internal/protocol"
)

// The audit log gets one JSON object per request (and per process exit).
// Contents, input, stdin and environment values are never written.
type (
	auditLog   = auditlog.Log
	auditEntry = auditlog.Entry
	auditError = auditlog.Error
)

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
