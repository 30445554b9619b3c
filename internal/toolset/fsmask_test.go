package toolset_test

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

// TestFileToolsMaskDeviceSecrets: "any echo of a value in what comes
// back — … a result the agent or an MCP client reads — shows as ***"
// (docs/tools.md). A file on a device that holds one of its secrets' values
// (a config a tool wrote with it) reaches the model through read as it is,
// while bash's cat of the same file shows ***.
func TestFileToolsMaskDeviceSecrets(t *testing.T) {
	t.Setenv("REX_SECRETS_BACKEND", "file")
	t.Setenv("REX_SECRETS_PASSPHRASE", "toolset test passphrase")
	f := fleettest.New(t, fleettest.Options{Hosts: 1})
	const value = "file-held-T0KEN-5e1b9"
	st, err := f.App.SecretStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Set("API_TOKEN", value); err != nil {
		t.Fatal(err)
	}
	declareSecrets(t, f, "h1", "API_TOKEN")
	f.WriteFile(t, "h1", "app.conf", "token="+value+"\n")
	ts := newToolset(t, f, toolset.Options{ClientName: "rex-agent"})
	ctx := fleettest.Context(t)
	res := ts.Do(ctx, toolset.Call{Tool: "bash", Target: "h1", Input: input(t, map[string]any{"command": "cat app.conf"})}, nil)
	if !strings.Contains(res.Text, "token=***") {
		t.Fatalf("bash cat: %s", res.Text)
	}
	rec := newRecorder()
	res = ts.Do(ctx, toolset.Call{Tool: "read", Target: "h1", Input: input(t, map[string]any{"path": "app.conf"})}, rec.event)
	if strings.Contains(res.Text, value) || strings.Contains(rec.output("h1"), value) {
		t.Errorf("read gave the model h1's secret value that bash shows as ***:\n%s", res.Text)
	}
	if !strings.Contains(res.Text, "token=***") {
		t.Errorf("read of app.conf does not show the masked line:\n%s", res.Text)
	}
}
