package tui_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestDeviceSecretsConsoleE2E: in the real console, every process on a
// device that declares secrets gets them as environment — a plain line on
// the target, /run, and a terminal opened with /attach — and the screen
// (panes, their titles, the message area) shows *** for their values; the
// host keeps no value anywhere under its home.
func TestDeviceSecretsConsoleE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	t.Parallel()
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	host := startHosts(t, 1, key)[0]
	c := startConsole(t, bin, 140, 40)
	c.run(fmt.Sprintf("/device add h1 %s@%s --key %s", host.User, host.Addr, key.Path), "added device h1")
	c.quit()

	// The secret, set as an operator would, in the file store.
	const value = "console-T0KEN-3f8a2d"
	secretEnv := []string{"REX_SECRETS_BACKEND=file", "REX_SECRETS_PASSPHRASE=console e2e passphrase"}
	set := exec.Command(filepath.Join(bin, "rex"), "secret", "set", "API_TOKEN")
	set.Env = append(append([]string(nil), c.env...), secretEnv...)
	set.Stdin = strings.NewReader(value + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("rex secret set: %v\n%s", err, out)
	}
	// h1 declares it.
	regPath := filepath.Join(c.home, ".config", "rex", "devices.json")
	var reg map[string]any
	b, err := os.ReadFile(regPath)
	if err != nil || json.Unmarshal(b, &reg) != nil {
		t.Fatalf("read the registry: %v\n%s", err, b)
	}
	reg["devices"].(map[string]any)["h1"].(map[string]any)["secrets"] = []string{"API_TOKEN"}
	b, _ = json.Marshal(reg)
	if err := os.WriteFile(regPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// The console reads the passphrase from its environment.
	c.sendLine("export " + strings.Join(secretEnv[:1], " ") + " REX_SECRETS_PASSPHRASE='console e2e passphrase'")
	c.sendLine(filepath.Join(bin, "rex"))
	c.waitFor("local ❯")

	n := strconv.Itoa(len(value))
	c.run("/target h1", "target h1")
	c.run(`echo "line=$API_TOKEN n=${#API_TOKEN}"`, "line=*** n="+n, "exit 0")
	c.run("/close all", "closed")
	c.run(`/run h1 -- 'echo "run=$API_TOKEN n=${#API_TOKEN}" >&2'`, "run=*** n="+n, "1 ok")
	c.run("/close all", "closed")
	c.run("/attach h1", "╭─ h1 · login shell", "typing here")
	c.sendLine(`export PS1='PTY> '; echo "pty=$API_TOKEN n=${#API_TOKEN}"`)
	c.waitPane("h1", "the token's echo", bodyLine("pty=*** n="+n))
	s := c.screen()
	if strings.Contains(s, value) {
		t.Errorf("the screen shows the value:\n%s", s)
	}
	c.sendLine("exit 0")
	c.waitFor("exit 0 ─", "enter reopens the terminal on h1")
	c.quit()

	filepath.WalkDir(host.Home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(value)) {
			t.Errorf("%s on the host holds the value", p)
		}
		return nil
	})
}
