package toolset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
)

// chainTools offers each usable executor-chain tool as a tool of its own,
// its CONFIG_SCHEMA as input schema.
func (ts *Toolset) chainTools() ([]Tool, error) {
	infos, err := commands.ToolInfos(ts.opts.App)
	if err != nil {
		return nil, fmt.Errorf("executor-chain tools are not offered: %w", err)
	}
	taken := map[string]bool{}
	for _, n := range BuiltinNames() {
		taken[n] = true
	}
	var tools []Tool
	for _, info := range infos {
		name := ChainToolName(info.ID)
		if taken[name] {
			name = "tool_" + name
		}
		if taken[name] {
			continue
		}
		taken[name] = true
		d := strings.TrimSpace(info.Description)
		if d == "" {
			d = "Runs the executor-chain tool " + info.ID + "."
		}
		if info.Once {
			d += fmt.Sprintf("\n\nThis is the rex tool %s, a tool of an MCP server that rex calls itself: it runs once, from the operator's machine, whatever the target, and needs the operator's consent.", info.ID)
		} else {
			d += fmt.Sprintf("\n\nThis is the rex tool %s; it runs on every host of the current target and needs the operator's consent.", info.ID)
		}
		tools = append(tools, Tool{Name: name, Description: d, Schema: chainSchema(info.Schema), Destructive: true, ChainID: info.ID, Once: info.Once})
	}
	return tools, nil
}

// ChainToolName is the tool name models see for a chain tool id: the
// characters function names allow (letters, digits, _ and -), at most 64.
func ChainToolName(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// chainSchema makes a CONFIG_SCHEMA fit as an input schema: an object,
// even when the tool declares no parameters.
func chainSchema(s map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range s {
		out[k] = v
	}
	if t, _ := out["type"].(string); t != "object" {
		out = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	if out["properties"] == nil {
		out["properties"] = map[string]any{}
	}
	return out
}

// prepareChain turns the model's arguments into the tool's parameters:
// strings as they are, anything else as its JSON text, which the chain
// coerces by the schema's types.
func (ts *Toolset) prepareChain(a *Action, raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return errors.New("the arguments must be a JSON object")
	}
	params := map[string]string{}
	for k, v := range obj {
		var s string
		if json.Unmarshal(v, &s) == nil {
			params[k] = s
			continue
		}
		if string(v) == "null" {
			continue
		}
		params[k] = string(v)
	}
	a.chainID, a.params = a.Tool.ChainID, params
	var b strings.Builder
	b.WriteString("rex tool run " + a.chainID)
	for _, k := range sortedKeys(params) {
		fmt.Fprintf(&b, " --param %s=%s", k, params[k])
	}
	a.Command = b.String()
	// A tool rex calls itself (an MCP tool over HTTP) runs once, from
	// this machine, whatever the target.
	if a.Tool.Once && (len(a.targets) != 1 || a.targets[0].Name != commands.LocalName) {
		a.reports = []string{commands.LocalName}
		a.Detail = fmt.Sprintf("rex calls this MCP tool over HTTP itself: once, from this machine (local), for target %s; no host runs it", a.HostsFolded())
	}
	return nil
}

// runChain runs a chain tool on every host as `rex tool run` does.
func (ts *Toolset) runChain(ctx context.Context, a *Action, progress func(Event)) *Result {
	spec := commands.ToolRunSpec{ID: a.chainID, Params: a.params, Targets: a.Target}
	var planErr error
	j := ts.startJob(a, progress, exitStatus, func(ctx context.Context, onEvent func(fanout.Event)) {
		_, planErr = commands.RunTool(ctx, ts.opts.App, spec, a.targets, commands.ToolRunOptions{
			OnEvent: onEvent, ClientName: ts.opts.ClientName, Confine: true})
	})
	r := ts.wait(ctx, j, ts.lim.defaultTimeout)
	if planErr != nil && !r.Running {
		return errorResult(a.Target, fmt.Errorf("%s: %w", a.chainID, planErr))
	}
	return r
}
