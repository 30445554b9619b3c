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

// TestAllowCommandsRefusesInterpreterCodeVariables: with allow_commands
// set, a request may not make an allowed program that is a script load
// code of the client's through its interpreter's variables (PYTHONPATH's
// sitecustomize, PERL5LIB's strict.pm, NODE_OPTIONS=--require), as it may
// not through the loader's (LD_PRELOAD). Many programs in /usr/bin are
// such scripts; the client writes the code into the roots with fs.write.
func TestAllowCommandsRefusesInterpreterCodeVariables(t *testing.T) {
	tools := t.TempDir() // outside the roots: the operator's programs
	script := func(name, interp, body string) string {
		if _, err := os.Stat(interp); err != nil {
			return ""
		}
		p := filepath.Join(tools, name)
		if err := os.WriteFile(p, []byte("#!"+interp+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	py := script("tool.py", "/usr/bin/python3", "print('ok')\n")
	pl := script("tool.pl", "/usr/bin/perl", "use strict;\nprint \"ok\\n\";\n")
	js := script("tool.js", "/usr/bin/node", "console.log('ok')\n")
	h := startWith(t, fmt.Sprintf("[security]\nallow_commands = [%q, %q, %q]\n", py, pl, js))
	sid := h.open()
	marker := filepath.Join(h.root, "PWNED")
	evil := filepath.Join(h.root, "evil")
	for name, body := range map[string]string{
		"sitecustomize.py": fmt.Sprintf("open(%q, 'w').close()\n", marker),
		"strict.pm":        fmt.Sprintf("open(my $f, '>', %q); 1;\n", marker),
		"x.js":             fmt.Sprintf("require('fs').writeFileSync(%q, '')\n", marker),
	} {
		h.ok(protocol.MethodFSWrite, protocol.FSWriteParams{SessionID: sid, Path: "evil/" + name, MkdirParents: true, Content: body}, nil)
	}
	for _, tt := range []struct {
		prog, name, value string
	}{
		{py, "PYTHONPATH", evil},
		{py, "PYTHONHOME", evil},
		{py, "PYTHONUSERBASE", evil},
		{py, "PYTHONSTARTUP", filepath.Join(evil, "sitecustomize.py")},
		{py, "PYTHONBREAKPOINT", "os.system"},
		{pl, "PERL5LIB", evil},
		{pl, "PERLLIB", evil},
		{pl, "PERL5OPT", "-Mstrict"},
		{pl, "PERL5DB", "BEGIN{}"},
		{js, "NODE_OPTIONS", "--require " + filepath.Join(evil, "x.js")},
		{js, "NODE_PATH", evil},
		{py, "RUBYOPT", "-r" + evil},
		{py, "RUBYLIB", evil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.prog == "" {
				t.Skip("interpreter not installed")
			}
			m := h.with(t).call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: []string{tt.prog},
				Env: map[string]string{tt.name: tt.value}})
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
				t.Errorf("%s=%s was accepted and the allowed %s ran the client's code", tt.name, tt.value, filepath.Base(tt.prog))
			} else {
				t.Errorf("%s=%s was accepted; with allow_commands set it must be refused", tt.name, tt.value)
			}
		})
	}
	// The allowed programs themselves still run.
	for _, prog := range []string{py, pl, js} {
		if prog == "" {
			continue
		}
		if out, _, _ := h.run(sid, protocol.ExecStartParams{Argv: []string{prog}}); out != "ok\n" {
			t.Errorf("%s: %q", prog, out)
		}
	}
}
