package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/llmtest"
)

// askKey is the API key of the e2e tests: the scripted server must get it
// and no file rex writes may hold it.
const askKey = "sk-e2e-3f9b1d77c0"

// withAgent configures [agent] for the scripted server and puts the key
// in the environment.
func withAgent(t *testing.T, e *rexEnv, srv *llmtest.Server) {
	t.Helper()
	dir := filepath.Join(e.home, ".config", "rex")
	os.MkdirAll(dir, 0o700)
	cfg := fmt.Sprintf("[agent]\nprovider = \"openai-compatible\"\nmodel = \"e2e-model\"\nbase_url = %q\napi_key_env = \"REX_E2E_KEY\"\n", srv.URL)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "REX_E2E_KEY="+askKey)
}

type askEvent struct {
	Type     string   `json:"type"`
	Text     string   `json:"text"`
	Tool     string   `json:"tool"`
	Command  string   `json:"command"`
	Target   string   `json:"target"`
	Hosts    []string `json:"hosts"`
	Host     string   `json:"host"`
	Data     string   `json:"data"`
	Summary  string   `json:"summary"`
	Result   string   `json:"result"`
	Decision string   `json:"decision"`
	Outcome  string   `json:"outcome"`
	Error    string   `json:"error"`
}

func parseEvents(t *testing.T, out string) []askEvent {
	t.Helper()
	var evs []askEvent
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e askEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("a line that is not a JSON event: %q", l)
		}
		evs = append(evs, e)
	}
	return evs
}

func TestAskJSONEndToEnd(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	srv := llmtest.New(t,
		&llmtest.Reply{Text: []string{"Checking."}, Calls: []llmtest.Call{llmtest.Bash("c1", "uname -s; cat role")}},
		&llmtest.Reply{When: llmtest.AfterTool("c1"), Text: []string{"Both run **Linux**; ", "h2 has no role."}},
	)
	withAgent(t, f.rexEnv, srv)
	os.WriteFile(filepath.Join(f.hostHome("h1"), "role"), []byte("web\n"), 0o644)

	out, errOut, code := f.run("ask", "--target", "good", "--json", "--allow", "bash", "--", "what", "OS", "runs", "here?")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	evs := parseEvents(t, out)
	types := map[string]int{}
	var text strings.Builder
	var start, result, end askEvent
	outHosts := map[string]string{}
	for _, e := range evs {
		types[e.Type]++
		switch e.Type {
		case "text":
			text.WriteString(e.Text)
		case "tool_start":
			start = e
		case "tool_result":
			result = e
		case "turn_end":
			end = e
		case "output":
			outHosts[e.Host] += e.Data
		}
	}
	if evs[0].Type != "turn_start" || evs[len(evs)-1].Type != "turn_end" || end.Outcome != "finished" {
		t.Errorf("first %+v, last %+v", evs[0], evs[len(evs)-1])
	}
	if start.Tool != "bash" || start.Command != "uname -s; cat role" || start.Target != "good" || strings.Join(start.Hosts, ",") != "h1,h2" {
		t.Errorf("tool_start %+v", start)
	}
	if result.Summary != "1/2 ok; h2 exit 1" || !strings.Contains(result.Result, "h1 · exit 0\n  Linux\n  web\n") {
		t.Errorf("tool_result %+v", result)
	}
	if outHosts["h1"] != "Linux\nweb\n" || !strings.Contains(outHosts["h2"], "Linux\n") {
		t.Errorf("output by host %q", outHosts)
	}
	if text.String() != "Checking.Both run **Linux**; h2 has no role." || types["consent"] != 1 || types["usage"] != 2 {
		t.Errorf("text %q, events %v", text.String(), types)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer "+askKey || reqs[0].Model != "e2e-model" {
		t.Fatalf("%d requests", len(reqs))
	}
	if res, _ := reqs[1].ToolResult("c1"); !strings.HasPrefix(res.Text(), "target good: h[1-2]\n") {
		t.Errorf("the model got %q", res.Text())
	}
	// Audited as rex-agent on both hosts.
	for _, h := range []string{"h1", "h2"} {
		b, err := os.ReadFile(filepath.Join(f.hostHome(h), ".local", "state", "rexd", "audit.log"))
		if err != nil || !strings.Contains(string(b), `"client_name":"rex-agent"`) || !strings.Contains(string(b), "uname -s; cat role") {
			t.Errorf("%s's audit log: %v\n%s", h, err, b)
		}
	}
	// The conversation is kept, and no file holds the key.
	convs, _ := filepath.Glob(filepath.Join(f.home, ".local", "state", "rex", "agent", "*.jsonl"))
	if len(convs) != 1 {
		t.Errorf("conversations %v", convs)
	}
	dirs := []string{f.home}
	for _, h := range []string{"h1", "h2"} {
		dirs = append(dirs, f.hostHome(h))
	}
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, de os.DirEntry, err error) error {
			if err == nil && de.Type().IsRegular() {
				if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(askKey)) {
					t.Errorf("%s holds the API key", p)
				}
			}
			return nil
		})
	}
}

func TestAskTranscriptAndRefusal(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	srv := llmtest.New(t,
		llmtest.Calls(llmtest.Bash("c1", "touch made-by-agent")),
		&llmtest.Reply{When: llmtest.AfterTool("c1"), Text: []string{"Made it.\n"}},
		llmtest.Calls(llmtest.Bash("c2", "touch refused-marker")),
	)
	withAgent(t, f.rexEnv, srv)

	out, errOut, code := f.run("ask", "-w", "h1", "--yes", "--", "make a file")
	want := "\n→ bash `touch made-by-agent` on h1\n  ✓ 1/1 ok\n\nMade it.\n"
	if code != 0 || out != want {
		t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %s", code, out, want, errOut)
	}
	if _, err := os.Stat(filepath.Join(f.hostHome("h1"), "made-by-agent")); err != nil {
		t.Errorf("the command did not run: %v", err)
	}

	// Without --yes or --allow, bash is refused: exit 1, nothing ran.
	out, errOut, code = f.run("ask", "-w", "h1", "--", "make another")
	if code != 1 || !strings.Contains(errOut, "rex: refused bash `touch refused-marker` on h1 (rex ask asks no questions: pass --yes, or --allow bash)") {
		t.Errorf("exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(f.hostHome("h1"), "refused-marker")); err == nil {
		t.Error("a refused command ran")
	}

	// No model configured: one sentence, exit 1.
	os.Remove(filepath.Join(f.home, ".config", "rex", "config.toml"))
	_, errOut, code = f.run("ask", "--", "hello")
	if code != 1 || !strings.HasPrefix(errOut, "rex: no agent model is configured: add an [agent] table") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("unconfigured: exit %d %q", code, errOut)
	}
	_, errOut, code = f.run("ask", "--yes", "--allow", "bash", "--", "x")
	if code != 2 {
		t.Errorf("--yes with --allow: exit %d %q", code, errOut)
	}
}

func TestAskInterrupt(t *testing.T) {
	f := newSSHFleet(t, 1, false)
	srv := llmtest.New(t, llmtest.Calls(llmtest.Bash("c1", "echo pid $$; exec sleep 300")))
	withAgent(t, f.rexEnv, srv)
	cmd := f.cmd("ask", "-w", "h1", "--json", "--yes", "--", "wait")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	pid := 0
	for pid == 0 && sc.Scan() {
		var e askEvent
		json.Unmarshal(sc.Bytes(), &e)
		if e.Type == "output" && strings.HasPrefix(e.Data, "pid ") {
			pid, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(e.Data, "pid ")))
		}
	}
	if pid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no pid from the remote command; stderr %s", errOut.String())
	}
	cmd.Process.Signal(os.Interrupt)
	var last askEvent
	for sc.Scan() {
		json.Unmarshal(sc.Bytes(), &last)
	}
	err = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d (%v), want 130; stderr %s", code, err, errOut.String())
	}
	if last.Type != "turn_end" || last.Outcome != "cancelled" {
		t.Errorf("last event %+v", last)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil && !zombie(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil && !zombie(pid) {
		t.Errorf("the remote command (pid %d) survived ctrl+c", pid)
	}
}
