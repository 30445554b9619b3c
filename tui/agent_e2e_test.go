package tui_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/llmtest"
	"github.com/rexconsole/rex/internal/sshtest"
)

// TestConsoleAgentE2E drives the real console under tmux: `? what kernel
// runs on these hosts` with a group of three loopback sshd hosts as the
// target, against a scripted OpenAI-compatible server. The tool call
// shows with its target and hosts, the consent dialog asks, the output
// lands in the host panes, and the answer shows rendered; ctrl+c stops a
// turn and the command it runs; deny stops another.
func TestConsoleAgentE2E(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the console's end-to-end tests drive tmux; install tmux")
	}
	bin := buildConsole(t)
	key := sshtest.NewKey(t, "ed25519")
	fleet := sshtest.Fleet(t, 3, sshtest.Options{Authorized: []*sshtest.Key{key}})
	kernel, err := exec.Command("uname", "-r").Output()
	if err != nil {
		t.Fatal(err)
	}
	release := strings.TrimSpace(string(kernel))

	srv := llmtest.New(t,
		&llmtest.Reply{When: llmtest.Mentions("what kernel runs on these hosts"),
			Text: []string{"Let me ", "check."}, Calls: []llmtest.Call{llmtest.Bash("k1", "uname -r")}},
		&llmtest.Reply{When: llmtest.AfterTool("k1"), Text: []string{"All three run **Linux** ", release, "."}},
		&llmtest.Reply{When: llmtest.Mentions("wait for me"), Calls: []llmtest.Call{llmtest.Bash("w1", "echo pid $$; exec sleep 300")}},
		&llmtest.Reply{When: llmtest.Mentions("clean up"), Calls: []llmtest.Call{llmtest.Bash("r1", "rm -rf ~/precious")}},
		&llmtest.Reply{When: llmtest.Mentions("how many hosts"), Text: []string{"Three hosts."}},
		&llmtest.Reply{When: func(r *llmtest.Request) bool {
			// The resumed conversation carries the first one's tool result.
			return llmtest.Mentions("and the kernel again?")(r) && llmtest.Mentions("3/3 ok")(r)
		}, Text: []string{"Still ", release, "."}},
	)
	for _, h := range []string{"h1", "h2", "h3"} {
		srv.Add(
			&llmtest.Reply{When: func(r *llmtest.Request) bool {
				return strings.Contains(r.Messages[0].Text(), "works on host "+h+" only") && r.Last().Role == "user"
			}, Calls: []llmtest.Call{llmtest.Bash("e-"+h, "cat precious")}},
			&llmtest.Reply{When: llmtest.AfterTool("e-" + h), Text: []string{h + " keeps its file."}},
		)
	}

	c := startConsole(t, bin, 160, 50)
	cfg := fmt.Sprintf("[agent]\nmodel = \"e2e-model\"\nbase_url = %q\n", srv.URL)
	os.MkdirAll(filepath.Join(c.home, ".config", "rex"), 0o700)
	if err := os.WriteFile(filepath.Join(c.home, ".config", "rex", "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, s := range fleet {
		c.run(fmt.Sprintf("/device add h%d %s@%s --key %s", i+1, s.User, s.Addr, key.Path), fmt.Sprintf("added device h%d", i+1))
		os.WriteFile(filepath.Join(s.Home, "precious"), []byte("keep\n"), 0o644)
	}
	c.run("/device group create web", "created group web")
	c.run("/device group add web h1 h2 h3", "added h1, h2, h3 to group web")
	c.run("/target web", "web (3) ❯")

	// The question: the call shows as it waits, with the dialog.
	s := c.run("? what kernel runs on these hosts", "The agent asks to run bash", "uname -r", "Runs on web — 3 hosts: h[1-3]")
	if !strings.Contains(s, "⚙ bash uname -r → web (h[1-3])") || !strings.Contains(s, "waiting for your answer") || !strings.Contains(s, "Let me check.") {
		t.Errorf("while asking:\n%s", s)
	}
	c.keys("y")
	s = c.waitFor("All three run Linux "+release, "✓ 3/3 ok", "e2e-model")
	if strings.Contains(s, "**") || strings.Contains(s, "The agent asks") {
		t.Errorf("after the answer:\n%s", s)
	}
	for _, h := range []string{"h1", "h2", "h3"} {
		if !strings.Contains(s, "╭─ "+h) {
			t.Errorf("no pane for %s:\n%s", h, s)
		}
	}
	if strings.Count(s, release) < 4 {
		t.Errorf("the output did not land in the three host panes:\n%s", s)
	}
	for i, h := range fleet {
		b, _ := os.ReadFile(filepath.Join(h.Home, ".local", "state", "rexd", "audit.log"))
		if !strings.Contains(string(b), `"client_name":"rex-agent"`) || !strings.Contains(string(b), `"command":"uname -r"`) {
			t.Errorf("h%d's audit log lacks the agent's command:\n%s", i+1, b)
		}
	}

	// ctrl+c stops the turn and the remote command.
	c.run("? wait for me", "The agent asks to run bash", "exec sleep 300")
	c.keys("s")
	// The hosts' panes show the pids of the sleeps they run.
	pids := map[int]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(pids) < 3 && time.Now().Before(deadline) {
		s = c.screen()
		for _, f := range strings.Fields(strings.ReplaceAll(s, "│", " ")) {
			if n, err := strconv.Atoi(f); err == nil && n > 1 && isSleep(n) {
				pids[n] = true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(pids) < 3 {
		t.Fatalf("the three remote sleeps are not on the screen (%v):\n%s", pids, s)
	}
	c.keys("C-c")
	c.waitFor("cancelled; the request and every command", "✗ 0/3 ok; h[1-3] stopped")
	deadline = time.Now().Add(10 * time.Second)
	for pid := range pids {
		for syscall.Kill(pid, 0) == nil && isSleep(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil && isSleep(pid) {
			t.Errorf("the remote sleep %d survived ctrl+c", pid)
		}
	}

	// A new conversation forgets "allow for this session". Deny: nothing
	// runs, the turn stops, the model is not asked again.
	c.run("/agent new", "a new conversation")
	n := len(srv.Requests())
	c.run("? clean up", "The agent asks to run bash", "rm -rf ~/precious")
	c.keys("n")
	c.waitFor("✗ refused", "the operator refused rm -rf ~/precious on web")
	for i, h := range fleet {
		if b, _ := os.ReadFile(filepath.Join(h.Home, "precious")); string(b) != "keep\n" {
			t.Errorf("h%d's file is gone", i+1)
		}
	}
	if got := len(srv.Requests()); got != n+1 {
		t.Errorf("%d requests after the refusal, want %d", got, n+1)
	}
	c.run("/agent", "agent e2e-model on openai-compatible · conversation ")

	// /agent on: lines go to the agent, ! runs one on the target.
	c.run("/agent on", "every line now goes to the agent")
	c.waitFor("web (3) ? ")
	c.run("how many hosts do I have", "Three hosts.")
	c.run("!echo direct-$((6*7))", "direct-42")
	c.run("/agent off", "lines run on the target again")

	// /agent resume lists the conversations and continues one.
	s = c.run("/agent resume", "what kernel runs on these hosts")
	id := ""
	for _, f := range strings.Fields(s) {
		if len(f) == 22 && f[8] == '-' && f[15] == '-' {
			if _, err := strconv.Atoi(f[:8]); err == nil {
				id = f
			}
		}
	}
	if id == "" {
		t.Fatalf("no conversation id listed:\n%s", s)
	}
	c.run("/agent resume "+id, "resumed conversation "+id)
	c.run("? and the kernel again?", "Still "+release+".")

	// /agent each: a loop per host; one "allow on all" answers the three.
	c.run("/agent new", "a new conversation")
	c.run("/agent each web -- does this host keep its precious file", "The agent asks to run bash", "cat precious", "Allow on all hosts (a)")
	c.keys("a")
	s = c.waitFor("3/3 finished", "HOST", "h1 keeps its file.", "h3 keeps its file.")
	if os.Getenv("REX_SHOW") != "" {
		t.Logf("%s", s)
	}
	if strings.Contains(s, "The agent asks") || strings.Contains(s, "waiting for your answer") {
		t.Errorf("asked again after allow on all:\n%s", s)
	}
	c.quit()
}

// isSleep reports whether pid runs sleep (not a zombie).
func isSleep(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && strings.Contains(string(b), "(sleep)") && !strings.Contains(string(b), ") Z ")
}
