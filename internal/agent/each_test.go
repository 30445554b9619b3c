package agent_test

import (
	"strings"
	"testing"

	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/llmtest"
)

// forHost matches the requests of one host's loop (its system prompt
// names the host).
func forHost(host string, then func(*llmtest.Request) bool) func(*llmtest.Request) bool {
	return func(r *llmtest.Request) bool {
		if len(r.Messages) == 0 || !strings.Contains(r.Messages[0].Text(), "works on host "+host+" only") {
			return false
		}
		return then == nil || then(r)
	}
}

func TestAgentEach(t *testing.T) {
	var replies []*llmtest.Reply
	for _, h := range []string{"h1", "h2", "h3"} {
		replies = append(replies,
			&llmtest.Reply{When: forHost(h, func(r *llmtest.Request) bool { return r.Last().Role == "user" }),
				Calls: []llmtest.Call{llmtest.Bash("c-"+h, "cat role")}},
			&llmtest.Reply{When: forHost(h, llmtest.AfterTool("c-"+h)), Text: []string{"Done on " + h + "."}})
	}
	srv := llmtest.New(t, replies...)
	h := newHarness(t, srv, setup{hosts: 3})
	for _, host := range []string{"h1", "h2"} {
		h.fleet.WriteFile(t, host, "role", host+"-role\n")
	}
	h.answer = func(agent.Request) agent.Decision { return agent.AllowAll }
	opts := agent.EachOptions{Target: "fleet", Hosts: []string{"h1", "h2", "h3"}, Task: "what is this host's role?", Concurrency: 2, Emit: h.emit}
	opts.Session = h.sessionOptions()
	res := agent.RunEach(fleettest.Context(t), opts)
	if len(res) != 3 {
		t.Fatalf("results %+v", res)
	}
	for i, host := range []string{"h1", "h2", "h3"} {
		r := res[i]
		if r.Host != host || r.Outcome != agent.OutcomeFinished || r.Steps != 2 || r.Tokens != 240 || r.Text != "Done on "+host+"." {
			t.Errorf("%s: %+v", host, r)
		}
	}
	// One question answered "allow on all" for the three loops.
	if h.askedN() != 1 || !h.asked[0].Each {
		t.Errorf("asked %+v", h.asked)
	}
	// Each loop's call went to its own host only.
	for _, host := range []string{"h1", "h2", "h3"} {
		var got string
		for _, r := range srv.Requests() {
			if m, ok := r.ToolResult("c-" + host); ok {
				got = m.Text()
			}
		}
		if !strings.HasPrefix(got, "target "+host+"\n"+host+" · ") {
			t.Errorf("%s's loop got %q", host, got)
		}
	}
	starts := map[string]string{}
	for _, e := range h.eventsOf(agent.EventToolStart) {
		starts[e.Host] = e.Target
	}
	if starts["h1"] != "h1" || starts["h3"] != "h3" {
		t.Errorf("events by host %v", starts)
	}
	table := agent.EachTable(res)
	if !strings.Contains(table, "h2    finished  2      240") || !strings.HasSuffix(table, "3/3 finished") {
		t.Errorf("table:\n%s", table)
	}
}

// TestAllowAllEndsWithItsRun: "allow on all hosts" answers the loops of
// one /agent each run. The console keeps one Consent for all its runs, so
// a later run, another task perhaps on another group, asks again for
// the same command.
func TestAllowAllEndsWithItsRun(t *testing.T) {
	step := func(host, id string) []*llmtest.Reply {
		return []*llmtest.Reply{
			{When: forHost(host, func(r *llmtest.Request) bool { return r.Last().Role == "user" }),
				Calls: []llmtest.Call{llmtest.Bash(id, "systemctl restart app")}},
			{When: forHost(host, llmtest.AfterTool(id)), Text: []string{"Done on " + host + "."}},
		}
	}
	srv := llmtest.New(t, append(step("h1", "a1"), step("h2", "a2")...)...)
	h := newHarness(t, srv, setup{hosts: 2})
	h.answer = func(agent.Request) agent.Decision { return agent.AllowAll }
	opts := agent.EachOptions{Target: "fleet", Hosts: []string{"h1", "h2"}, Task: "restart the app", Concurrency: 1, Emit: h.emit}
	opts.Session = h.sessionOptions()
	ctx := fleettest.Context(t)
	for _, r := range agent.RunEach(ctx, opts) {
		if r.Outcome != agent.OutcomeFinished {
			t.Fatalf("first run: %+v", r)
		}
	}
	if h.askedN() != 1 {
		t.Fatalf("first run asked %d times", h.askedN())
	}

	// A later run: the operator now says no.
	srv.Add(step("h1", "b1")...)
	h.answer = func(agent.Request) agent.Decision { return agent.Deny }
	opts.Hosts, opts.Task = []string{"h1"}, "restart the app again"
	res := agent.RunEach(ctx, opts)
	if h.askedN() != 2 || res[0].Outcome != agent.OutcomeDenied {
		t.Errorf("a later /agent each run reused the first run's \"allow on all hosts\": asked %d times, %+v", h.askedN(), res[0])
	}
}
