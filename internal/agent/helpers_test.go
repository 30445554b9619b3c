package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/internal/fleettest"
	"github.com/rexconsole/rex/internal/llmtest"
	"github.com/rexconsole/rex/internal/toolset"
)

func TestMain(m *testing.M) { fleettest.Main(m) }

// testKey is the API key of the tests: it must reach the server and no
// file rex writes.
const testKey = "sk-rex-test-7d1e0c2b9a"

// harness is a session over a fleet and a scripted server.
type harness struct {
	t       *testing.T
	fleet   *fleettest.Fleet
	srv     *llmtest.Server
	sess    *agent.Session
	consent *agent.Consent
	ts      *toolset.Toolset
	store   *agent.Store
	opts    agent.Options

	mu     sync.Mutex
	target string
	asked  []agent.Request
	answer func(agent.Request) agent.Decision
	events []agent.Event
	notify chan agent.Event
}

type setup struct {
	hosts   int
	target  string
	config  agent.Config
	options func(*agent.Options)
	// key is the API key the model is given; "" is testKey.
	key string
}

func newHarness(t *testing.T, srv *llmtest.Server, s setup) *harness {
	t.Helper()
	f := fleettest.New(t, fleettest.Options{Hosts: s.hosts})
	h := &harness{t: t, fleet: f, srv: srv, target: s.target, notify: make(chan agent.Event, 4096)}
	if h.target == "" {
		h.target = "local"
	}
	h.answer = func(agent.Request) agent.Decision { return agent.AllowOnce }
	h.ts = toolset.New(toolset.Options{App: f.App, ClientName: "rex-agent"})
	t.Cleanup(func() { h.ts.Close() })
	h.consent = &agent.Consent{Ask: func(ctx context.Context, r agent.Request) (agent.Decision, error) {
		h.mu.Lock()
		h.asked = append(h.asked, r)
		ans := h.answer
		h.mu.Unlock()
		return ans(r), nil
	}}
	cfg := s.config
	cfg.Provider, cfg.Model, cfg.BaseURL, cfg.APIKeyEnv = agent.ProviderOpenAICompatible, "test-model", srv.URL, "REX_TEST_API_KEY"
	cfg = cfg.With(agent.Overrides{})
	if s.key == "" {
		s.key = testKey
	}
	getenv := func(k string) string {
		if k == "REX_TEST_API_KEY" {
			return s.key
		}
		return ""
	}
	model, err := agent.NewModel(context.Background(), cfg, getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.store = &agent.Store{Dir: filepath.Join(f.Dir, "state", "agent")}
	opts := agent.Options{
		Model: model, Config: cfg, Toolset: h.ts, Consent: h.consent, Store: h.store,
		Target:     h.currentTarget,
		RetryDelay: 5 * time.Millisecond,
		Getenv:     getenv,
	}
	if s.options != nil {
		s.options(&opts)
	}
	h.opts = opts
	h.sess = agent.New(opts)
	return h
}

// sessionOptions are the options the harness's session was made with.
func (h *harness) sessionOptions() agent.Options { return h.opts }

func (h *harness) currentTarget() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.target
}

func (h *harness) setTarget(t string) {
	h.mu.Lock()
	h.target = t
	h.mu.Unlock()
}

func (h *harness) emit(e agent.Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
	select {
	case h.notify <- e:
	default:
	}
}

func (h *harness) turn(ctx context.Context, prompt string) *agent.TurnResult {
	h.t.Helper()
	return h.sess.Turn(ctx, prompt, h.emit)
}

func (h *harness) eventsOf(typ string) []agent.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []agent.Event
	for _, e := range h.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) askedN() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.asked)
}

// waitEvent waits for an event that satisfies cond.
func (h *harness) waitEvent(what string, cond func(agent.Event) bool) agent.Event {
	h.t.Helper()
	for _, e := range h.allEvents() {
		if cond(e) {
			return e
		}
	}
	deadline := time.After(60 * time.Second)
	for {
		select {
		case e := <-h.notify:
			if cond(e) {
				return e
			}
		case <-deadline:
			h.t.Fatalf("no event %s", what)
		}
	}
}

func (h *harness) allEvents() []agent.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]agent.Event(nil), h.events...)
}

// text is the answer as it streamed.
func (h *harness) text() string {
	var b strings.Builder
	for _, e := range h.eventsOf(agent.EventText) {
		b.WriteString(e.Text)
	}
	return b.String()
}

// filesHolding lists the files under dirs whose content holds s.
func filesHolding(t *testing.T, s string, dirs ...string) (found []string, walked int) {
	t.Helper()
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !e.Type().IsRegular() {
				return nil
			}
			walked++
			b, err := os.ReadFile(p)
			if err == nil && strings.Contains(string(b), s) {
				found = append(found, p)
			}
			return nil
		})
	}
	return found, walked
}
