package rexd_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAllowCommandsRefusesPythonWarningsBrowser: with allow_commands
// set, an allowed program that is a Python script must not run a program
// of the client's. PYTHONWARNINGS names a warning category by module, and
// Python imports that module at start-up: "antigravity" opens a web
// browser, which is whatever BROWSER names, so PYTHONWARNINGS plus BROWSER
// run any file, here a script the client wrote into the roots. Both
// variables are refused, together and alone.
func TestAllowCommandsRefusesPythonWarningsBrowser(t *testing.T) {
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Fatal("needs python3 (in CI's packages, .ci/run)")
	}
	tools := t.TempDir() // outside the roots: the operator's programs
	py := filepath.Join(tools, "tool.py")
	if err := os.WriteFile(py, []byte("#!"+python+"\nprint('ok')\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := startWith(t, fmt.Sprintf("[security]\nallow_commands = [%q]\n", py))
	sid := h.open()
	marker := filepath.Join(h.root, "PWNED")
	h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "evil.sh", Perm: "0755",
		Content: fmt.Sprintf("#!/bin/sh\necho pwned > %s\n", marker)}, nil)
	evil := filepath.Join(h.root, "evil.sh")
	for name, env := range map[string]map[string]string{
		"both":           {"PYTHONWARNINGS": "ignore::antigravity.x::0", "BROWSER": evil},
		"PYTHONWARNINGS": {"PYTHONWARNINGS": "ignore::antigravity.x::0"},
		"BROWSER":        {"BROWSER": evil},
	} {
		t.Run(name, func(t *testing.T) {
			m := h.with(t).call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{py}, Env: env})
			if m.Error != nil {
				if m.Error.Code != protocol.CodeUnauthorized {
					t.Fatalf("refused with %d, want %d: %s", m.Error.Code, protocol.CodeUnauthorized, m.Error.Message)
				}
				return
			}
			var res protocol.ExecStartResult
			if err := json.Unmarshal(m.Result, &res); err != nil {
				t.Fatal(err)
			}
			h.with(t).exitOf(res.ProcessID, 30*time.Second)
			if _, err := os.Stat(marker); err == nil {
				os.Remove(marker)
				t.Errorf("%v was accepted and the allowed tool.py ran the client's evil.sh", env)
			} else {
				t.Errorf("%v was accepted; with allow_commands set it must be refused", env)
			}
		})
	}
}
