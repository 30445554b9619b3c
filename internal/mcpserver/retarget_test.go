package mcpserver_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fleettest"
)

// TestUseTargetReadsNoLocalFile: use_target takes a TARGETS expression
// from the model, and TARGETS has ^FILE, a host list read from the
// operator's machine. A client offered only list and use_target (no read,
// no bash) must not get the content of local files through it: the host
// names a ^FILE yields (or the parse errors, which quote its lines) come
// back in use_target's result.
func TestUseTargetReadsNoLocalFile(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	secret := filepath.Join(f.Dir, "private-notes.txt")
	if err := os.WriteFile(secret, []byte("hunter2-token-9c1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := opts(f)
	o.AllowRetarget, o.Allow = true, []string{"list"}
	c := connect(t, o, "")
	r := c.call(t, "use_target", map[string]any{"target": "^" + secret}, nil, nil)
	if got := text(t, r); strings.Contains(got, "hunter2-token-9c1") {
		t.Errorf("use_target handed a local file's content to a client that may not read files:\n%s", got)
	}
}
