package toolset_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

// declareSecrets gives a fleet device a "secrets" list in the registry.
func declareSecrets(t *testing.T, f *fleettest.Fleet, device string, names ...string) {
	t.Helper()
	path := filepath.Join(f.Dir, "devices.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var reg map[string]any
	if err := json.Unmarshal(b, &reg); err != nil {
		t.Fatal(err)
	}
	reg["devices"].(map[string]any)[device].(map[string]any)["secrets"] = names
	b, _ = json.Marshal(reg)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBashGetsDeviceSecretsMasked: a device's secrets reach the agent's
// and MCP's bash as environment, like every process rex starts there, and
// the result a model reads (and the output streamed meanwhile) shows ***
// for their values; the audit log names them, redacted.
func TestBashGetsDeviceSecretsMasked(t *testing.T) {
	t.Setenv("REX_SECRETS_BACKEND", "file")
	t.Setenv("REX_SECRETS_PASSPHRASE", "toolset test passphrase")
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	const value = "agent-visible-T0KEN-0c7d"
	st, err := f.App.SecretStore()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Set("API_TOKEN", value); err != nil {
		t.Fatal(err)
	}
	declareSecrets(t, f, "h1", "API_TOKEN")
	ts := newToolset(t, f, toolset.Options{})
	rec := newRecorder()
	res := ts.Do(fleettest.Context(t), toolset.Call{Tool: "bash", Target: "fleet",
		Input: input(t, map[string]any{"command": `echo "tok=$API_TOKEN len=${#API_TOKEN}"`})}, rec.event)
	want := "h1 · exit 0\n  tok=*** len=" + strconv.Itoa(len(value))
	if !strings.Contains(res.Text, want) || !strings.Contains(res.Text, "h2 · exit 0\n  tok= len=0") {
		t.Errorf("bash result (want %q and h2 without the secret):\n%s", want, res.Text)
	}
	if strings.Contains(res.Text, value) || strings.Contains(rec.output("h1"), value) {
		t.Errorf("the value reached the model's result or the streamed output:\n%s\n%s", res.Text, rec.output("h1"))
	}
	if !strings.Contains(rec.output("h1"), "tok=***") {
		t.Errorf("streamed output of h1: %q", rec.output("h1"))
	}
	found := false
	for _, e := range f.Audit(t, "h1") {
		if e.Method != "exec.start" || e.ClientName != "rex-agent" {
			continue
		}
		if env, _ := e.Params["env"].(map[string]any); env["API_TOKEN"] == "<redacted>" {
			found = true
		}
	}
	if !found {
		t.Errorf("h1's audit log has no exec.start by rex-agent with API_TOKEN redacted: %+v", f.Audit(t, "h1"))
	}
	if b, _ := os.ReadFile(f.AuditPath("h1")); strings.Contains(string(b), value) {
		t.Error("h1's audit log holds the value")
	}
}
