package commands

import (
	"encoding/json"
	"errors"
	"path/filepath"

	"github.com/rexconsole/rex/internal/auditlog"
	"github.com/rexconsole/rex/internal/secrets"
)

// AuditFile is rex's own audit log under its state directory
// ($XDG_STATE_HOME/rex/audit.log). It records what rex does itself on
// an agent's or operator's behalf where no rexd sees it: a call of an MCP
// tool over HTTP. Its lines are shaped as rexd's.
const AuditFile = "audit.log"

// AuditPath is where rex keeps its audit log; "" when the App has no
// state directory.
func (app *App) AuditPath() string {
	if app.StateDir == "" {
		return ""
	}
	return filepath.Join(app.StateDir, AuditFile)
}

// openAudit opens rex's audit log. A call that must be audited is refused
// when it cannot be opened.
func openAudit(app *App) (*auditlog.Log, error) {
	p := app.AuditPath()
	if p == "" {
		return nil, errors.New("rex has no state directory to keep its audit log in")
	}
	return auditlog.Open(p)
}

// maskedJSON is v as JSON decodes it, every string (keys too) with the
// secret values masked.
func maskedJSON(v any, values []string) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var d any
	if json.Unmarshal(b, &d) != nil {
		return nil
	}
	return maskValue(d, values)
}

func maskValue(v any, values []string) any {
	switch x := v.(type) {
	case string:
		return secrets.Mask(x, values)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[secrets.Mask(k, values)] = maskValue(e, values)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = maskValue(e, values)
		}
		return out
	}
	return v
}
