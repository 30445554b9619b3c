package commands

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/fanout"
)

func TestParseRun(t *testing.T) {
	tests := []struct {
		args    string
		targets string
		argv    []string
		command string
		json    bool
		gather  bool
		timeout time.Duration
		conc    int
		err     string
	}{
		{args: "web -- uname -a", targets: "web", argv: []string{"uname", "-a"}},
		{args: "--json web -- true", targets: "web", argv: []string{"true"}, json: true},
		{args: "web --gather --timeout 5s --concurrency 8 -- ls", targets: "web", argv: []string{"ls"}, gather: true, timeout: 5 * time.Second, conc: 8},
		{args: "web --timeout=30 -- ls", targets: "web", argv: []string{"ls"}, timeout: 30 * time.Second},
		{args: "web uptime", targets: "web", argv: []string{"uptime"}},
		{args: "web ls -la /", targets: "web", argv: []string{"ls", "-la", "/"}},
		{args: "web -- ls|wc", targets: "web", command: "ls|wc"},
		{args: "", err: "which targets"},
		{args: "web --", err: "no command"},
		{args: "web --bogus -- ls", err: "unknown flag --bogus"},
		{args: "web --json --gather -- ls", err: "pick one"},
		{args: "web --timeout soon -- ls", err: "--timeout"},
		{args: "web --concurrency 0 -- ls", err: "--concurrency"},
	}
	for _, tt := range tests {
		args := strings.Fields(tt.args)
		s, err := ParseRun(args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want %q", tt.args, err, tt.err)
			}
			if ExitCode(err) != 2 {
				t.Errorf("%q: usage errors exit 2, got %d", tt.args, ExitCode(err))
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if s.Targets != tt.targets || strings.Join(s.Task.Argv, " ") != strings.Join(tt.argv, " ") || s.Task.Command != tt.command ||
			s.JSON != tt.json || s.Gather != tt.gather || s.Timeout != tt.timeout || s.Concurrency != tt.conc || s.Task.Timeout != tt.timeout {
			t.Errorf("%q: got %+v", tt.args, s)
		}
	}
}

func TestTaskFor(t *testing.T) {
	if tk := TaskFor([]string{"echo $HOME"}); tk.Command != "echo $HOME" || tk.Argv != nil {
		t.Errorf("one word with shell syntax: %+v", tk)
	}
	if tk := TaskFor([]string{"echo", "$HOME"}); tk.Command != "" || len(tk.Argv) != 2 {
		t.Errorf("several words stay an argv: %+v", tk)
	}
	if tk := TaskFor([]string{"uptime"}); tk.Command != "" || tk.Argv[0] != "uptime" {
		t.Errorf("one plain word is an argv: %+v", tk)
	}
}

func code(n int) *int { return &n }

// events is a scripted run: interleaved output, a partial last line, a
// failing host and an unreachable one.
func scriptedRun(sink outputSink) {
	ev := func(t string, k fanout.EventKind, s string) {
		sink.event(fanout.Event{Target: t, Kind: k, Data: []byte(s)})
	}
	ev("web1", fanout.EventStart, "")
	ev("db10", fanout.EventStart, "")
	ev("web1", fanout.EventStdout, "Linux web1\nup 3 ")
	ev("db10", fanout.EventStdout, "Linux db\n")
	ev("web1", fanout.EventStdout, "days\n")
	ev("db10", fanout.EventStderr, "warning: disk\n")
	ev("web1", fanout.EventStdout, "no newline")
	results := []*fanout.Result{
		{Target: "web1", ExitCode: code(0), Duration: 1500 * time.Millisecond},
		{Target: "db10", ExitCode: code(2), Duration: 200 * time.Millisecond},
		{Target: "web2", ExitCode: code(0), Duration: 100 * time.Millisecond},
		{Target: "gone", Unreachable: true, Err: errors.New("connect gone (10.0.0.9:22): connection refused; is sshd running there?")},
	}
	ev("web2", fanout.EventStdout, "Linux web1\nup 3 days\nno newline")
	for _, r := range results {
		sink.event(fanout.Event{Target: r.Target, Kind: fanout.EventResult, Result: r})
	}
	sink.finish(&fanout.Summary{Results: results, OK: 2, Failed: 1, Unreachable: 1})
}

func TestPrefixOutput(t *testing.T) {
	var out bytes.Buffer
	ts := []fanout.Target{{Name: "web1"}, {Name: "db10"}, {Name: "web2"}, {Name: "gone"}}
	scriptedRun(newPrefixSink(&out, &out, ts, false))
	want := "web1: Linux web1\n" +
		"db10: Linux db\n" +
		"web1: up 3 days\n" +
		"db10! warning: disk\n" +
		"web2: Linux web1\n" +
		"web2: up 3 days\n" +
		"web1: no newline\n" +
		"web2: no newline\n" +
		"gone! connect gone (10.0.0.9:22): connection refused; is sshd running there?\n"
	if out.String() != want {
		t.Errorf("prefix output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestGatherOutput(t *testing.T) {
	var out bytes.Buffer
	scriptedRun(newGatherSink(&out, false))
	want := "---------------\n" +
		"db10 (1) exit 2\n" +
		"---------------\n" +
		"Linux db\nwarning: disk\n" +
		"---------------\n" +
		"gone (1) connect gone (10.0.0.9:22): connection refused; is sshd running there?\n" +
		"---------------\n" +
		"---------------\n" +
		"web[1-2] (2)\n" +
		"---------------\n" +
		"Linux web1\nup 3 days\nno newline\n"
	if out.String() != want {
		t.Errorf("gathered output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestJSONOutput(t *testing.T) {
	var out bytes.Buffer
	scriptedRun(newJSONSink(&out))
	want := `{"target":"web1","event":"stdout","data":"Linux web1\nup 3 ","encoding":"utf8"}
{"target":"db10","event":"stdout","data":"Linux db\n","encoding":"utf8"}
{"target":"web1","event":"stdout","data":"days\n","encoding":"utf8"}
{"target":"db10","event":"stderr","data":"warning: disk\n","encoding":"utf8"}
{"target":"web1","event":"stdout","data":"no newline","encoding":"utf8"}
{"target":"web2","event":"stdout","data":"Linux web1\nup 3 days\nno newline","encoding":"utf8"}
{"target":"web1","event":"exit","exit_code":0,"duration_ms":1500}
{"target":"db10","event":"exit","exit_code":2,"duration_ms":200}
{"target":"web2","event":"exit","exit_code":0,"duration_ms":100}
{"target":"gone","event":"error","error":"connect gone (10.0.0.9:22): connection refused; is sshd running there?","unreachable":true}
`
	if out.String() != want {
		t.Errorf("json output:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestSummaryLine(t *testing.T) {
	s := &fanout.Summary{OK: 7, Failed: 1, Unreachable: 2, Duration: 1234 * time.Millisecond,
		Results: make([]*fanout.Result, 10), Slowest: &fanout.Result{Target: "h3", Duration: 900 * time.Millisecond}}
	if got := SummaryLine(s); got != "rex: 7 ok, 1 failed, 2 unreachable in 1.23s (slowest h3, 900ms)" {
		t.Errorf("summary %q", got)
	}
}
