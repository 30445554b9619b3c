package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalToolRunIsAudited: `rex tool run` on local runs through the
// local rexd like every other target, so its audit log records the
// tool's process under the command line's session name.
func TestLocalToolRunIsAudited(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	project := filepath.Join(f.home, "work")
	os.MkdirAll(filepath.Join(project, ".ai", "tools", "my"), 0o755)
	os.WriteFile(filepath.Join(project, ".ai/tools/my/where.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\necho \"pid-parent=$PPID marker-4471\"\n"), 0o755)
	audit := filepath.Join(f.home, ".local", "state", "rexd", "audit.log")
	os.Remove(audit)
	out, errOut, code := f.runIn(project, "", nil, "tool", "run", "my/where", "--target", "local")
	if code != 0 || !strings.Contains(out, "local: pid-parent=") {
		t.Fatalf("tool run on local: %d\n%s%s", code, out, errOut)
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatalf("local's rexd kept no audit log at %s: %v", audit, err)
	}
	found := false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			ClientName string         `json:"client_name"`
			Method     string         `json:"method"`
			Params     map[string]any `json:"params"`
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Method != "exec.start" {
			continue
		}
		if argv, _ := json.Marshal(e.Params["argv"]); strings.Contains(string(argv), "where.sh") {
			found = true
			if e.ClientName != "rex" {
				t.Errorf("the tool's exec is audited as %q, want rex", e.ClientName)
			}
		}
	}
	if !found {
		t.Errorf("local's audit log has no exec.start of the tool:\n%s", b)
	}
}
