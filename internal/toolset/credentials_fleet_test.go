package toolset_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

// TestFileToolsReadNoCredentials: read and grep run without asking and
// their results go to the model's provider, so they do not read an SSH
// private key (or the like) on any host. On local the link that names
// one is resolved too; public keys stay readable.
func TestFileToolsReadNoCredentials(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	const secret = "b3BlbnNzaC1rZXktdjEAkey-9d2"
	key := filepath.Join(f.LocalHome, ".ssh", "id_test")
	os.MkdirAll(filepath.Dir(key), 0o700)
	for p, body := range map[string]string{
		key:                                     "-----BEGIN OPENSSH PRIVATE KEY-----\n" + secret + "\n-----END OPENSSH PRIVATE KEY-----\n",
		key + ".pub":                            "ssh-ed25519 AAAApublic-4c1 test\n",
		filepath.Join(f.LocalHome, "plain.txt"): "b3BlbnNzaC1rZXktdjEAplain-7e3\n",
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(key, filepath.Join(f.LocalHome, "notes")); err != nil {
		t.Fatal(err)
	}
	f.WriteFile(t, "h1", ".ssh/id_test", secret+"\n")

	ts := newToolset(t, f, toolset.Options{ClientName: "rex-agent"})
	ctx := fleettest.Context(t)
	refused := func(res *toolset.Result, what string) {
		t.Helper()
		if strings.Contains(res.Text, secret) {
			t.Errorf("%s gave the private key to the model:\n%s", what, res.Text)
		}
		if !strings.Contains(res.Text, "holds credentials") || !strings.Contains(res.Text, "bash") {
			t.Errorf("%s: the answer does not say why, nor what to do instead:\n%s", what, res.Text)
		}
	}
	for _, c := range []struct{ target, path string }{
		{"local", ".ssh/id_test"}, // local starts in its home (the fleet's)
		{"local", key},
		{"local", "notes"}, // a link to the key, resolved on rex's own machine
		{"h1", "~/.ssh/id_test"},
	} {
		res := ts.Do(ctx, toolset.Call{Tool: "read", Target: c.target, Input: input(t, map[string]any{"path": c.path})}, nil)
		refused(res, "read "+c.path+" on "+c.target)
	}
	res := ts.Do(ctx, toolset.Call{Tool: "grep", Target: "local", Input: input(t, map[string]any{"pattern": "b3BlbnNzaC1rZXktdjEA"})}, nil)
	if strings.Contains(res.Text, secret) || !strings.Contains(res.Text, "plain-7e3") {
		t.Errorf("grep over the home should find plain.txt and skip ~/.ssh:\n%s", res.Text)
	}
	res = ts.Do(ctx, toolset.Call{Tool: "grep", Target: "local", Input: input(t, map[string]any{"pattern": ".", "path": ".ssh"})}, nil)
	refused(res, "grep in ~/.ssh")
	res = ts.Do(ctx, toolset.Call{Tool: "read", Target: "local", Input: input(t, map[string]any{"path": ".ssh/id_test.pub"})}, nil)
	if res.IsError || !strings.Contains(res.Text, "public-4c1") {
		t.Errorf("a public key should be readable:\n%s", res.Text)
	}
	if file, err := ts.ReadFile(ctx, "local", key); err == nil {
		t.Errorf("a file resource read the private key: %q", file.Text)
	} else if !strings.Contains(err.Error(), "holds credentials") {
		t.Errorf("a file resource of the private key: %v", err)
	}
}
