package agent_test

import (
	"testing"

	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/llmtest"
)

// TestEachSessionGrantHolds: in /agent each the loops share one
// Consent, and every call sets the Consent's target to its loop's host.
// SetTarget forgets all session grants whenever the target differs from
// the last one, so "allow for this session" answered in h1's loop is
// forgotten as soon as h2's loop makes a call: with two loops of two bash
// calls each, answering "s" to every question should ask twice (once per
// host), and asks three times.
func TestEachSessionGrantHolds(t *testing.T) {
	var replies []*llmtest.Reply
	for _, h := range []string{"h1", "h2"} {
		replies = append(replies,
			&llmtest.Reply{When: forHost(h, func(r *llmtest.Request) bool { return r.Last().Role == "user" }),
				Calls: []llmtest.Call{llmtest.Bash("a-"+h, "sleep 1")}},
			&llmtest.Reply{When: forHost(h, llmtest.AfterTool("a-"+h)), Calls: []llmtest.Call{llmtest.Bash("b-"+h, "true")}},
			&llmtest.Reply{When: forHost(h, llmtest.AfterTool("b-"+h)), Text: []string{"Done on " + h + "."}})
	}
	srv := llmtest.New(t, replies...)
	h := newHarness(t, srv, setup{hosts: 2})
	h.answer = func(agent.Request) agent.Decision { return agent.AllowSession }
	opts := agent.EachOptions{Target: "fleet", Hosts: []string{"h1", "h2"}, Task: "check", Concurrency: 2, Emit: h.emit}
	opts.Session = h.sessionOptions()
	res := agent.RunEach(fleettest.Context(t), opts)
	for _, r := range res {
		if r.Outcome != agent.OutcomeFinished {
			t.Fatalf("%s: %+v", r.Host, r)
		}
	}
	if n := h.askedN(); n != 2 {
		t.Errorf("asked %d times for two hosts whose first call was allowed for the session", n)
	}
}
