package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/devices"
)

// TestDeviceSecretsOfTargets: the secrets a device declares are found
// whichever way its target was resolved (plain, through a group, with
// "become" or --sudo, which wrap it), and only a device has any.
func TestDeviceSecretsOfTargets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devices.json")
	reg := `{"devices": {
	  "plain":  {"host": "10.0.0.1", "secrets": ["API_TOKEN", "DB_PASSWORD"]},
	  "become": {"host": "10.0.0.2", "become": true, "secrets": ["API_TOKEN"]},
	  "none":   {"host": "10.0.0.3"},
	  "bad":    {"host": "10.0.0.4", "secrets": ["PATH"]}
	}, "groups": {"g": ["plain", "none"]}}`
	if err := os.WriteFile(path, []byte(reg), 0o600); err != nil {
		t.Fatal(err)
	}
	resolve := Resolver(devices.NewStore(path), nil)
	names := func(spec string, sudo bool) (map[string]string, error) {
		ts, err := resolve(spec)
		if err != nil {
			t.Fatal(err)
		}
		if sudo {
			ts = WithSudo(ts)
		}
		out := map[string]string{}
		for _, tg := range ts {
			n, err := deviceSecrets(tg)
			if err != nil {
				return nil, err
			}
			out[tg.Name] = strings.Join(n, ",")
		}
		return out, nil
	}
	for _, tc := range []struct {
		spec string
		sudo bool
		want map[string]string
	}{
		{"plain,none,local", false, map[string]string{"plain": "API_TOKEN,DB_PASSWORD", "none": "", "local": ""}},
		{"g", false, map[string]string{"plain": "API_TOKEN,DB_PASSWORD", "none": ""}},
		{"become", false, map[string]string{"become": "API_TOKEN"}},
		{"plain,local", true, map[string]string{"plain": "API_TOKEN,DB_PASSWORD", "local": ""}},
		{"root@10.9.9.9", false, map[string]string{"root@10.9.9.9": ""}},
	} {
		got, err := names(tc.spec, tc.sudo)
		if err != nil {
			t.Errorf("%s: %v", tc.spec, err)
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s (sudo %v): %s has %q, want %q", tc.spec, tc.sudo, k, got[k], v)
			}
		}
	}
	if _, err := names("bad", false); err == nil || !strings.Contains(err.Error(), "device bad: secret name PATH is refused") {
		t.Errorf("a reserved name in a device: %v", err)
	}
}
