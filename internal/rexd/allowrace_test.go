package rexd_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/protocol"
)

// TestAllowCommandsRunsWhatWasChecked: with allow_commands set, the file
// run is the one the allow list was checked against. A program named
// through a symlinked directory in the roots was checked with the link's
// target resolved but run by the path as sent, so a link switched between
// the check and the exec ran a program of the client's. Another writer
// switches the link here, as fast as it can, while the client asks; the
// loop is bounded, and on main the client's program ran within it.
func TestAllowCommandsRunsWhatWasChecked(t *testing.T) {
	h := startWith(t, "[security]\nallow_commands = [\"true\"]\n")
	sid := h.open()
	realTrue, err := filepath.EvalSymlinks(mustLookPath(t, "true"))
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(h.root, "PWNED")
	evil := filepath.Join(h.root, "evil")
	if err := os.MkdirAll(evil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(evil, filepath.Base(realTrue)), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(h.root, "d")
	if err := os.Symlink(filepath.Dir(realTrue), link); err != nil {
		t.Fatal(err)
	}
	flipLink(t, link, evil, filepath.Dir(realTrue))
	argv := []string{filepath.Join(link, filepath.Base(realTrue))}
	for i := 0; i < 300; i++ {
		m := h.call(protocol.MethodExecStart, protocol.ExecStartParams{SessionID: sid, Argv: argv})
		if m.Error != nil {
			if m.Error.Code != protocol.CodeUnauthorized {
				t.Fatalf("attempt %d: %v", i, m.Error)
			}
			continue // the check saw the client's directory
		}
		var res protocol.ExecStartResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatal(err)
		}
		h.exitOf(res.ProcessID, 30*time.Second)
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("attempt %d: %s passed the allow list as %s, and the client's program ran", i, argv[0], realTrue)
		}
	}
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed", name)
	}
	return p
}
