package chain

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/secrets"
)

// TestLocalPlanHasNoPassphrase: rex plans graphs and HTTP MCP calls
// against this machine (a LocalTarget without Env: the process's own
// environment). That environment must not hold REX_SECRETS_PASSPHRASE, or a
// tool (a project's, from a repository just cloned) could read it with
// ${REX_SECRETS_PASSPHRASE} in its env or url, and with it open every
// secret rex keeps; a local tool process never sees it either.
func TestLocalPlanHasNoPassphrase(t *testing.T) {
	const pass = "correct horse battery staple"
	t.Setenv(secrets.PassphraseEnv, pass)
	proj := project(t, map[string]string{
		".ai/tools/x/tool.yaml": "executor_id: rex/core/primitives/execute\n" +
			"env_config:\n  env:\n    LEAK: \"${" + secrets.PassphraseEnv + ":-none}\"\n" +
			"config:\n  command: /bin/true\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "x/tool", Target: &LocalTarget{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pl.Env["LEAK"]; got != "none" {
		t.Fatalf("a tool planned on this machine expanded ${%s} to %q", secrets.PassphraseEnv, got)
	}
	env, err := (&LocalTarget{}).Environ(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range env {
		if k == secrets.PassphraseEnv || strings.Contains(v, pass) {
			t.Fatalf("LocalTarget's environment (what a local tool process inherits) holds %s", k)
		}
	}
}
