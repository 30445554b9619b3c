package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/toolset"
)

func TestAllowedPrefix(t *testing.T) {
	allow := []string{"systemctl status", "df", "uname"}
	for cmd, want := range map[string]bool{
		"df":                        true,
		"df -h":                     true,
		"systemctl status nginx":    true,
		"uname -r":                  true,
		"dfx":                       false,
		"systemctl stop nginx":      false,
		"df; rm -rf ~":              false,
		"df && reboot":              false,
		"df | sh":                   false,
		"df $(reboot)":              false,
		"df `reboot`":               false,
		"df > /etc/passwd":          false,
		"df\nreboot":                false,
		"uname -r & reboot":         false,
		"systemctl status nginx #x": false,
		"":                          false,
	} {
		if got := allowedPrefix(allow, cmd); got != want {
			t.Errorf("allowedPrefix(%q) = %v, want %v", cmd, got, want)
		}
	}
}

func TestDenyPatterns(t *testing.T) {
	deny := []string{"rm -rf", "*reboot*", "dd if=*"}
	for cmd, want := range map[string]bool{
		"rm -rf /tmp/x":             true,
		"sudo rm -rf /":             true,
		"systemctl reboot":          true,
		"dd if=/dev/zero of=/dev/x": true,
		"rm -f x":                   false,
		"ls /boot":                  false,
	} {
		if got := matchAny(deny, cmd); got != want {
			t.Errorf("matchAny(%q) = %v, want %v", cmd, got, want)
		}
	}
}

func action(tool string, readOnly bool, command, target string) *toolset.Action {
	return &toolset.Action{Tool: toolset.Tool{Name: tool, ReadOnly: readOnly}, Command: command, Target: target, Hosts: []string{target}}
}

func TestConsentPolicy(t *testing.T) {
	ctx := context.Background()
	asked := 0
	answer := Deny
	ask := func(context.Context, Request) (Decision, error) { asked++; return answer, nil }
	tests := []struct {
		name    string
		c       *Consent
		a       *toolset.Action
		how     string
		allowed bool
		asks    bool
	}{
		{"read-only runs", &Consent{Ask: ask}, action("read", true, "read x", "web"), ConsentReadOnly, true, false},
		{"bash asks", &Consent{Ask: ask}, action("bash", false, "uptime", "web"), ConsentRefused, false, true},
		{"yolo", &Consent{Ask: ask, Yolo: true}, action("bash", false, "uptime", "web"), ConsentYolo, true, false},
		{"deny pattern asks under yolo", &Consent{Ask: ask, Yolo: true, Deny: []string{"*reboot*"}}, action("bash", false, "reboot", "web"), ConsentRefused, false, true},
		{"allow prefix", &Consent{Ask: ask, Allow: []string{"df"}}, action("bash", false, "df -h", "web"), ConsentAllowed, true, false},
		{"allow prefix is for bash", &Consent{Ask: ask, Allow: []string{"edit"}}, action("edit", false, "edit x", "web"), ConsentRefused, false, true},
		{"allowed tool", &Consent{Ask: ask, AllowTools: []string{"write"}}, action("write", false, "write 1 line to x", "web"), ConsentTool, true, false},
		{"no way to ask", &Consent{}, action("bash", false, "uptime", "web"), ConsentRefused, false, false},
	}
	for _, tt := range tests {
		asked = 0
		how, err := tt.c.Check(ctx, tt.a, "c1", false)
		if how != tt.how || (err == nil) != tt.allowed || (asked > 0) != tt.asks {
			t.Errorf("%s: %q, %v, asked %d", tt.name, how, err, asked)
		}
	}

	// Allow for the session: keyed on tool and target, cleared when the
	// target changes.
	c := &Consent{Ask: ask}
	c.SetTarget("web")
	answer, asked = AllowSession, 0
	for i := 0; i < 3; i++ {
		if _, err := c.Check(ctx, action("bash", false, "uptime "+string(rune('a'+i)), "web"), "c", false); err != nil {
			t.Fatal(err)
		}
	}
	if asked != 1 {
		t.Errorf("asked %d times for one session grant", asked)
	}
	if _, err := c.Check(ctx, action("edit", false, "edit x", "web"), "c", false); err != nil || asked != 2 {
		t.Errorf("another tool asks again: %v, asked %d", err, asked)
	}
	c.SetTarget("db")
	c.SetTarget("web")
	answer = Deny
	if _, err := c.Check(ctx, action("bash", false, "uptime", "web"), "c", false); err == nil || asked != 3 {
		t.Errorf("after a target change the grant stayed: %v, asked %d", err, asked)
	}

	// Allow on all hosts, for /agent each: the same command on other
	// hosts runs; another command asks.
	c = &Consent{Ask: ask}
	answer, asked = AllowAll, 0
	c.Check(ctx, action("bash", false, "apt-get update", "h1"), "c", true)
	answer = Deny
	if how, err := c.Check(ctx, action("bash", false, "apt-get update", "h2"), "c", true); err != nil || how != ConsentAll {
		t.Errorf("allow on all: %q %v", how, err)
	}
	if _, err := c.Check(ctx, action("bash", false, "apt-get upgrade", "h2"), "c", true); err == nil {
		t.Error("another command ran without asking")
	}
}

// TestConsentShowsAndKeysTheWholeCall: what the operator is asked about
// is the whole call, and "allow on all hosts" covers only that call. A
// bash call's stdin is part of what runs (sh with a script on stdin), so
// the request shows it; an edit or write with other text, or a bash call
// with other stdin, is another call and asks again, though its one-line
// command ("edit PATH", "sh") reads the same.
func TestConsentShowsAndKeysTheWholeCall(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{Hosts: 2})
	ts := toolset.New(toolset.Options{App: f.App})
	t.Cleanup(func() { ts.Close() })
	ctx := fleettest.Context(t)
	prepare := func(tool, host string, in map[string]any) *toolset.Action {
		t.Helper()
		raw, _ := json.Marshal(in)
		a, err := ts.Prepare(ctx, toolset.Call{Tool: tool, Input: raw, Target: host})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	var asked []Request
	answer := AllowAll
	c := &Consent{Ask: func(_ context.Context, r Request) (Decision, error) { asked = append(asked, r); return answer, nil }}

	script := "rm -rf ~/important\n"
	if _, err := c.Check(ctx, prepare("bash", "h1", map[string]any{"command": "sh", "stdin": script}), "c1", true); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !strings.Contains(asked[0].Command+asked[0].Detail, "rm -rf ~/important") {
		t.Errorf("the consent request for sh with a script on stdin does not show the script: %+v", asked)
	}
	answer = Deny
	for _, tt := range []struct {
		tool, host string
		first      map[string]any
		second     map[string]any
	}{
		{"bash", "h2", nil, map[string]any{"command": "sh", "stdin": "reboot\n"}},
		{"edit", "h1", map[string]any{"path": "/etc/motd", "old": "a", "new": "b"}, map[string]any{"path": "/etc/motd", "old": "b", "new": "rm"}},
		{"write", "h1", map[string]any{"path": "/etc/motd", "content": "hello\n"}, map[string]any{"path": "/etc/motd", "content": "HELLO\n"}},
	} {
		if tt.first != nil {
			answer = AllowAll
			if _, err := c.Check(ctx, prepare(tt.tool, tt.host, tt.first), "c", true); err != nil {
				t.Fatal(err)
			}
			answer = Deny
		}
		n := len(asked)
		how, err := c.Check(ctx, prepare(tt.tool, "h2", tt.second), "c", true)
		if err == nil || len(asked) != n+1 {
			t.Errorf("%s %v ran on an \"allow on all hosts\" answer given for another call (%q, %v)", tt.tool, tt.second, how, err)
		}
	}
	// The same call on another host is what "allow on all hosts" is for.
	answer = AllowAll
	c.Check(ctx, prepare("edit", "h1", map[string]any{"path": "/etc/hosts", "old": "x", "new": "y"}), "c", true)
	answer = Deny
	if how, err := c.Check(ctx, prepare("edit", "h2", map[string]any{"path": "/etc/hosts", "old": "x", "new": "y"}), "c", true); err != nil || how != ConsentAll {
		t.Errorf("the same edit on h2: %q, %v", how, err)
	}
}

// TestAllowPrefixIsNotForStdin: an allow prefix lets a plain command run
// unasked; what a call feeds it on stdin is not plain, as the same text
// after -e or -c would not be (mysql with DROP DATABASE on stdin, python3
// with a program). Such a call asks. And deny patterns, which ask even
// under --yolo, read the stdin too.
func TestAllowPrefixIsNotForStdin(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	ts := toolset.New(toolset.Options{App: f.App})
	t.Cleanup(func() { ts.Close() })
	ctx := fleettest.Context(t)
	asked := 0
	c := &Consent{Allow: []string{"mysql", "python3"}, Ask: func(context.Context, Request) (Decision, error) { asked++; return Deny, nil }}
	for _, in := range []map[string]any{
		{"command": "mysql prod", "stdin": "DROP DATABASE prod;\n"},
		{"command": "python3", "stdin": "import shutil; shutil.rmtree('/srv')\n"},
	} {
		raw, _ := json.Marshal(in)
		a, err := ts.Prepare(ctx, toolset.Call{Tool: "bash", Input: raw})
		if err != nil {
			t.Fatal(err)
		}
		n := asked
		if how, err := c.Check(ctx, a, "c", false); err == nil || asked != n+1 {
			t.Errorf("%v ran unasked (%q)", in, how)
		}
	}
	// Under --yolo a deny pattern asks, whether the command says it or
	// the script it reads on stdin does.
	y := &Consent{Yolo: true, Deny: []string{"*reboot*", "rm -rf"}, Ask: c.Ask}
	for _, in := range []map[string]any{
		{"command": "sh", "stdin": "echo bye\nreboot\n"},
		{"command": "bash -s", "stdin": "rm -rf /srv/data\n"},
	} {
		raw, _ := json.Marshal(in)
		a, err := ts.Prepare(ctx, toolset.Call{Tool: "bash", Input: raw})
		if err != nil {
			t.Fatal(err)
		}
		n := asked
		if how, err := y.Check(ctx, a, "c", false); err == nil || asked != n+1 {
			t.Errorf("under --yolo, %v ran unasked (%q)", in, how)
		}
	}
	// Without stdin the prefix still allows.
	a, err := ts.Prepare(ctx, toolset.Call{Tool: "bash", Input: json.RawMessage(`{"command": "python3 --version"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if how, err := c.Check(ctx, a, "c", false); err != nil || how != ConsentAllowed {
		t.Errorf("python3 --version: %q %v", how, err)
	}
}

// TestSessionGrantKeepsItsChainTool: "allow for this session" for a chain
// tool is for the rex tool the operator was asked about. Tool files added
// later can give its name to another tool (ops.disk sorts before ops/disk
// and takes ops_disk); that one asks.
func TestSessionGrantKeepsItsChainTool(t *testing.T) {
	f := fleettest.New(t, fleettest.Options{})
	dir := filepath.Join(f.App.ConfigDir, ".ai", "tools")
	os.MkdirAll(filepath.Join(dir, "ops"), 0o755)
	os.WriteFile(filepath.Join(dir, "ops", "disk.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: disk\necho disk\n"), 0o755)
	ts := toolset.New(toolset.Options{App: f.App, ChainTools: true})
	t.Cleanup(func() { ts.Close() })
	ctx := fleettest.Context(t)
	prepare := func() *toolset.Action {
		t.Helper()
		a, err := ts.Prepare(ctx, toolset.Call{Tool: "ops_disk", Input: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	asked := 0
	answer := AllowSession
	c := &Consent{Ask: func(context.Context, Request) (Decision, error) { asked++; return answer, nil }}
	c.SetTarget("local")
	if _, err := c.Check(ctx, prepare(), "c1", false); err != nil {
		t.Fatal(err)
	}
	if how, err := c.Check(ctx, prepare(), "c2", false); err != nil || how != ConsentSession {
		t.Fatalf("the same tool again: %q %v", how, err)
	}
	os.WriteFile(filepath.Join(dir, "ops.disk.sh"), []byte("#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: description: other\necho other\n"), 0o755)
	answer = Deny
	a := prepare()
	if how, err := c.Check(ctx, a, "c3", false); err == nil {
		t.Errorf("ops_disk, now %s, ran on the grant given for ops/disk (%q)", a.Tool.ChainID, how)
	}
}
