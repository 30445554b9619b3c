package tui_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/sshtest"
)

// TestConsoleSyncE2E drives the real console under tmux against two
// loopback sshd hosts: /push of a small tree reaches done on both and the
// files are there; a second /push is up to date; /tool run of a bash tool
// on a host shows its output and exit status.
func TestConsoleSyncE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	fleet := sshtest.Fleet(t, 2, sshtest.Options{Authorized: []*sshtest.Key{key}})

	// The directory rex starts in: a tree to push and a project tool.
	proj := t.TempDir()
	files := map[string]string{
		"site/index.html":        "<h1>rex</h1>\n",
		"site/css/site.css":      "body { margin: 0 }\n",
		".ai/tools/ops/hello.sh": "#!/bin/bash\n# rex: executor_id: rex/core/runtimes/bash/bash\n# rex: version: \"1.0.0\"\n# rex: description: say hello\necho \"hello $REX_PARAM_NAME from $HOME\"\nexit \"${REX_PARAM_CODE:-0}\"\n",
	}
	for name, content := range files {
		p := filepath.Join(proj, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	c := startConsoleIn(t, bin, proj, 160, 45)
	for i, s := range fleet {
		c.run(fmt.Sprintf("/device add h%d %s@%s --key %s", i+1, s.User, s.Addr, key.Path), fmt.Sprintf("added device h%d", i+1))
	}
	c.run("/layout rows", "layout rows")

	// First push: both panes reach done with the line rex push prints.
	s := c.run("/push site srv/site h1,h2", ": created with 3 entries · sent 2 files, 2 dirs", "push site srv/site — 2 ok")
	if n := strings.Count(s, "done · sent 4 objects"); n != 2 {
		t.Errorf("%d panes say done, want 2:\n%s", n, s)
	}
	for i, h := range fleet {
		want := filepath.Join(h.Home, "srv", "site")
		if !strings.Contains(s, fmt.Sprintf("h%d: %s: created with 3 entries · sent 2 files, 2 dirs", i+1, want)) {
			t.Errorf("h%d's pane does not say where the tree went (%s):\n%s", i+1, want, s)
		}
		for name, content := range files {
			if !strings.HasPrefix(name, "site/") {
				continue
			}
			got, err := os.ReadFile(filepath.Join(h.Home, "srv", name))
			if err != nil || string(got) != content {
				t.Errorf("h%d holds %s = %q, %v; want %q", i+1, name, got, err, content)
			}
		}
	}

	// Again, unchanged: up to date everywhere.
	c.run("/close all", "closed 2 panes")
	s = c.run("/push site srv/site h1,h2", ": up to date · nothing sent", "push site srv/site — 2 ok")
	if n := strings.Count(s, "up to date · nothing to send"); n != 2 {
		t.Errorf("%d panes say up to date, want 2:\n%s", n, s)
	}

	// A tool on a host: its output and exit status in its pane.
	c.run("/close all", "closed 2 panes")
	s = c.run("/tool run ops/hello --param name=e2e --param code=4 --target h2", "hello e2e from "+fleet[1].Home, "exit 4", "tool ops/hello — 0 ok, 1 failed")
	if !strings.Contains(s, "╭─ h2 · tool ops/hello") {
		t.Errorf("the tool's pane is not h2's:\n%s", s)
	}
	c.quit()
}
