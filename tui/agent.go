package tui

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/fantasy"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/agent"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/internal/toolset"
	"github.com/rexconsole/rex/tui/agentview"
	"github.com/rexconsole/rex/tui/dialog"
	"github.com/rexconsole/rex/tui/engine"
)

// AgentOptions are the command line's say over the console's agent.
type AgentOptions struct {
	// Yolo runs every call without asking (deny patterns still ask); the
	// status bar says so.
	Yolo bool
	// Overrides are --provider, --model, --base-url.
	Overrides agent.Overrides
}

// The console's agent: `?` lines and /agent. The loop runs on goroutines
// of its own; what it reports (events, questions, tool calls for the host
// panes) is queued under a lock and taken in Update on the frame tick, the
// way fan-out output is, so a streaming answer never floods the program
// with messages.
type agentConsole struct {
	lm      fantasy.LanguageModel
	sess    *agent.Session
	ts      *toolset.Toolset
	consent *agent.Consent
	cfg     agent.Config
	view    *agentview.View
	pane    *agentPane
	on      bool // every line goes to the agent (/agent on)
	yolo    bool
	store   *agent.Store

	// target is the console's current target, read by the loop's
	// goroutines.
	target atomic.Value // string

	// turn is the running turn (or /agent each run), nil when idle; only
	// Update touches it.
	turn *agentTurn

	mu    sync.Mutex
	queue []agentItem
	calls map[string]*agentCall // by loop + call id
	asks  map[string]*agentAsk  // by dialog id
	seq   int
}

// agentTurn is a turn or an /agent each run in flight.
type agentTurn struct {
	prompt  string
	each    bool
	started time.Time
	cancel  context.CancelFunc
}

// agentItem is something the loop reported, for Update.
type agentItem struct {
	ev   *agent.Event
	stop bool
	ask  *agentAsk
	show *engine.Task
	end  *agent.TurnResult
	each []agent.EachResult
}

// agentAsk is a question waiting for the operator.
type agentAsk struct {
	id    string
	req   agent.Request
	ctx   context.Context
	reply chan agent.Decision
}

// agentCall is a tool call shown in host panes: an engine task fed by the
// toolset's events.
type agentCall struct {
	task    *engine.Task
	onEvent func(fanout.Event)
	done    chan struct{}
	once    sync.Once
	jobID   atomic.Value // string
	results []*fanout.Result
	mu      sync.Mutex
}

const consentDialogPrefix = "consent-"

// agentInit makes the agent on first use: the [agent] configuration, the
// model, the toolset on the console's pool and the consent service that
// asks through dialogs.
func (m *Model) agentInit() error {
	if m.ag != nil && m.ag.sess != nil {
		return nil
	}
	cfg, err := agent.LoadConfig(m.opts.ConfigDir)
	if err != nil {
		return err
	}
	cfg = cfg.With(m.opts.Agent.Overrides)
	if err := cfg.Ready(os.Getenv); err != nil {
		return err
	}
	if m.app == nil || m.app.Pool == nil {
		return errors.New("the agent needs connections to targets, which this console was started without")
	}
	model, err := agent.NewModel(m.ctx, cfg, os.Getenv, nil)
	if err != nil {
		return err
	}
	a := m.agentConsole()
	a.cfg = cfg
	a.ts = toolset.New(toolset.Options{App: m.app, ClientName: agent.ClientName, Concurrency: m.cfg.Concurrency, ChainTools: true})
	a.consent = &agent.Consent{Yolo: a.yolo, Allow: cfg.Allow, Deny: cfg.Deny, Ask: a.ask(m)}
	a.consent.SetTarget(m.target)
	if m.opts.StateDir != "" {
		a.store = &agent.Store{Dir: filepath.Join(m.opts.StateDir, "agent")}
	}
	a.lm = model
	a.sess = agent.New(m.agentOptions())
	return nil
}

// agentConsole returns the console's agent state, made on first use (it
// holds the transcript even before a model is configured).
func (m *Model) agentConsole() *agentConsole {
	if m.ag == nil {
		m.ag = &agentConsole{view: agentview.New(m.agentStyles()), calls: map[string]*agentCall{}, asks: map[string]*agentAsk{},
			yolo: m.opts.Agent.Yolo}
		m.ag.target.Store(m.target)
	}
	return m.ag
}

// agentOptions are the options of the console's sessions: the toolset on
// the console's pool, consent through dialogs, the current target, tool
// calls shown in host panes.
func (m *Model) agentOptions() agent.Options {
	a := m.ag
	scrollback, seed, mark, now, ctx := m.cfg.Scrollback, m.seed, m.signal.mark, m.now, m.ctx
	tasks := m.tasks
	return agent.Options{
		Model: a.lm, Config: a.cfg, Toolset: a.ts, Consent: a.consent, Store: a.store,
		Target: func() string { return a.target.Load().(string) },
		OnTool: func(c agent.ToolCall, ev toolset.Event) {
			a.onTool(c, ev, func(display, spec string, hosts []string) *engine.Task {
				return tasks.New(ctx, display, spec, hosts, now(), scrollback, seed, mark)
			}, now, mark)
		},
	}
}

// agentTargetChanged tells the agent the operator picked another target:
// its calls go there, and grants for the session are forgotten.
func (m *Model) agentTargetChanged() {
	if m.ag == nil {
		return
	}
	m.ag.target.Store(m.target)
	if m.ag.consent != nil {
		m.ag.consent.SetTarget(m.target)
	}
}

// push queues an item for Update and wakes the frame tick.
func (a *agentConsole) push(it agentItem, mark func()) {
	a.mu.Lock()
	a.queue = append(a.queue, it)
	a.mu.Unlock()
	mark()
}

// ask is the consent service's way to ask: a dialog, answered in Update.
func (a *agentConsole) ask(m *Model) agent.Asker {
	mark := m.signal.mark
	return func(ctx context.Context, r agent.Request) (agent.Decision, error) {
		a.mu.Lock()
		a.seq++
		q := &agentAsk{id: consentDialogPrefix + strconv.Itoa(a.seq), req: r, ctx: ctx, reply: make(chan agent.Decision, 1)}
		a.asks[q.id] = q
		a.mu.Unlock()
		a.push(agentItem{ask: q}, mark)
		select {
		case d := <-q.reply:
			return d, nil
		case <-ctx.Done():
			return agent.Deny, ctx.Err()
		}
	}
}

// onTool shows a tool call in host panes: an engine task like /run's, fed
// by the toolset's events, its job ending when the call (or its
// background job) ends. Stopping the task (ctrl+c on its pane) stops the
// turn, or the background job.
func (a *agentConsole) onTool(c agent.ToolCall, ev toolset.Event, newTask func(display, spec string, hosts []string) *engine.Task, now func() time.Time, mark func()) {
	key := c.Loop + "\x00" + c.ID
	a.mu.Lock()
	call := a.calls[key]
	a.mu.Unlock()
	switch ev.Kind {
	case toolset.EventStart:
		if call != nil || len(ev.Hosts) == 0 {
			return
		}
		display := "agent: " + c.Command
		if c.Loop != "" {
			display = "agent (" + c.Loop + "): " + c.Command
		}
		call = &agentCall{task: newTask(display, c.Target, ev.Hosts), done: make(chan struct{})}
		call.onEvent = call.task.OnEvent(now)
		a.mu.Lock()
		a.calls[key] = call
		a.mu.Unlock()
		for _, h := range ev.Hosts {
			call.onEvent(fanout.Event{Target: h, Kind: fanout.EventStart})
		}
		started := now()
		call.task.Start(func(ctx context.Context, _ func(fanout.Event)) *fanout.Summary {
			select {
			case <-call.done:
			case <-ctx.Done():
				// The operator stopped it: a background job is killed, a
				// call in its turn ends the turn.
				if id, _ := call.jobID.Load().(string); id != "" {
					go a.ts.Kill(id)
				} else {
					a.push(agentItem{stop: true}, mark)
				}
				<-call.done
			}
			call.mu.Lock()
			defer call.mu.Unlock()
			return fanout.Summarize(call.results, now().Sub(started))
		}, now, mark)
		a.push(agentItem{show: call.task}, mark)
	case toolset.EventOutput:
		if call != nil {
			kind := fanout.EventStdout
			if ev.Stderr {
				kind = fanout.EventStderr
			}
			call.onEvent(fanout.Event{Target: ev.Host, Kind: kind, Data: ev.Data})
		}
	case toolset.EventHostDone:
		if call != nil && ev.Result != nil {
			call.mu.Lock()
			call.results = append(call.results, ev.Result)
			call.mu.Unlock()
			call.onEvent(fanout.Event{Target: ev.Host, Kind: fanout.EventResult, Result: ev.Result})
		}
	case toolset.EventBackground:
		if call != nil {
			call.jobID.Store(ev.JobID)
		}
	case toolset.EventDone:
		if call != nil {
			a.mu.Lock()
			delete(a.calls, key)
			a.mu.Unlock()
			call.once.Do(func() { close(call.done) })
		}
	}
}

// agentBusy reports whether the agent has work in flight or queued.
func (m *Model) agentBusy() bool {
	if m.ag == nil {
		return false
	}
	m.ag.mu.Lock()
	queued := len(m.ag.queue) > 0
	m.ag.mu.Unlock()
	return m.ag.turn != nil || queued
}

// agentFrame takes what the loop reported since the last frame.
func (m *Model) agentFrame() {
	a := m.ag
	if a == nil {
		return
	}
	a.mu.Lock()
	items := a.queue
	a.queue = nil
	a.mu.Unlock()
	for _, it := range items {
		switch {
		case it.stop:
			m.agentStop()
		case it.ev != nil:
			a.view.Apply(*it.ev)
		case it.ask != nil:
			m.agentShowAsk(it.ask)
		case it.show != nil:
			m.agentShowTask(it.show)
		case it.end != nil || it.each != nil:
			m.agentEnded(it)
		}
	}
	// A question whose turn ended (cancelled) is taken down.
	for _, d := range m.dialogs.All() {
		if q := m.agentAskOf(d.ID()); q != nil && q.ctx.Err() != nil {
			m.dialogs.Close(d.ID())
			a.mu.Lock()
			delete(a.asks, d.ID())
			a.mu.Unlock()
		}
	}
	if a.pane != nil {
		a.pane.refresh(a.view)
	}
}

// agentAskOf finds a pending question by its dialog id.
func (m *Model) agentAskOf(id string) *agentAsk {
	if m.ag == nil || !strings.HasPrefix(id, consentDialogPrefix) {
		return nil
	}
	m.ag.mu.Lock()
	defer m.ag.mu.Unlock()
	return m.ag.asks[id]
}

// agentShowAsk opens the consent dialog of a question.
func (m *Model) agentShowAsk(q *agentAsk) {
	if q.ctx.Err() != nil {
		return
	}
	r := q.req
	loop := ""
	if r.Each {
		loop = r.Target // an /agent each loop works on its host alone
	}
	m.ag.view.Asking(r, loop)
	m.dialogs.Push(dialog.NewConsent(q.id, dialog.ConsentInfo{
		Tool: r.Tool, Command: r.Command, Detail: r.Detail, Target: r.Target,
		Hosts: devices.Fold(r.Hosts), NHosts: len(r.Hosts), Reason: r.Reason, Each: r.Each, Loop: loop,
	}))
}

// agentAnswer answers a question from its dialog.
func (m *Model) agentAnswer(id string, choice int) bool {
	q := m.agentAskOf(id)
	if q == nil {
		return false
	}
	m.ag.mu.Lock()
	delete(m.ag.asks, id)
	m.ag.mu.Unlock()
	d := agent.Deny
	switch choice {
	case dialog.ConsentOnce:
		d = agent.AllowOnce
	case dialog.ConsentSession:
		d = agent.AllowSession
	case dialog.ConsentAll:
		d = agent.AllowAll
	}
	q.reply <- d
	return true
}

// agentShowTask shows a tool call's task in its target's host panes:
// the current target's, which plain lines share, or (an /agent each
// loop's host, another target) panes of that target, reused by its next
// calls. The focus stays on the agent; while the operator types in a
// terminal, the keys and the layout stay where they are: a call made in
// the background must not send the rest of a typed line elsewhere.
func (m *Model) agentShowTask(t *engine.Task) {
	if m.keyPane() != nil {
		m.addToTarget(t)
		return
	}
	focus := m.focus
	m.showInTarget(t)
	if p := m.ag.pane; p != nil {
		for i, pp := range m.panes {
			if pp == Pane(p) {
				focus = i
			}
		}
		m.setFocus(focus, false)
	}
}

// agentEnded is the end of a turn or of an /agent each run.
func (m *Model) agentEnded(it agentItem) {
	a := m.ag
	a.turn = nil
	if it.each != nil {
		a.view.Block(agent.EachTable(it.each))
		m.info("/agent each: %s", eachLine(it.each))
		return
	}
	r := it.end
	switch r.Outcome {
	case agent.OutcomeFinished:
		m.info("the agent finished (%s)", plural(r.Steps, "step", "steps"))
	default:
		if r.Err != nil {
			m.fail(r.Err)
		}
	}
	m.msg.transient = true
}

func eachLine(res []agent.EachResult) string {
	ok := 0
	for _, r := range res {
		if r.Outcome == agent.OutcomeFinished {
			ok++
		}
	}
	return fmt.Sprintf("%d/%d hosts finished", ok, len(res))
}

// agentStop cancels the running turn (ctrl+c): the HTTP request and
// every command it started.
func (m *Model) agentStop() bool {
	if m.ag == nil || m.ag.turn == nil {
		return false
	}
	m.ag.turn.cancel()
	m.info("stopping the agent: its request and its commands")
	m.msg.transient = true
	return true
}

// ensureAgentPane opens the agent's pane first in the main area.
func (m *Model) ensureAgentPane() {
	a := m.agentConsole()
	if a.pane != nil {
		for i, p := range m.panes {
			if p == Pane(a.pane) {
				m.setFocus(i, false)
				return
			}
		}
	}
	if a.pane == nil {
		a.pane = &agentPane{keys: &m.keys, follow: true}
	}
	m.panes = append([]Pane{a.pane}, m.panes...)
	m.setFocus(0, false)
	m.zoom = false
}

// askAgent runs one turn with prompt.
func (m *Model) askAgent(prompt string) tea.Cmd {
	prompt = strings.TrimSpace(prompt)
	if prompt == "" {
		m.fail(errors.New("ask the agent something after the ?, e.g. ? why is the disk full"))
		return nil
	}
	if err := m.agentInit(); err != nil {
		m.fail(err)
		return nil
	}
	a := m.ag
	if a.turn != nil {
		m.fail(errors.New("the agent is still working; wait for it, or press ctrl+c to stop it"))
		return nil
	}
	a.target.Store(m.target)
	m.ensureAgentPane()
	a.view.Prompt(prompt)
	ctx, cancel := context.WithCancel(m.ctx)
	a.turn = &agentTurn{prompt: prompt, started: m.now(), cancel: cancel}
	mark := m.signal.mark
	sess := a.sess
	go func() {
		defer cancel()
		r := sess.Turn(ctx, prompt, func(e agent.Event) {
			ev := e
			if ev.Type == agent.EventOutput {
				return // host panes show output
			}
			a.push(agentItem{ev: &ev}, mark)
		})
		a.push(agentItem{end: r}, mark)
	}()
	a.pane.refresh(a.view)
	return m.ensureTick()
}

// cmdAgent is /agent: on, off, new, resume [ID], each GROUP -- TASK, or
// (alone) what the agent is and how it stands.
func (m *Model) cmdAgent(args []string) tea.Cmd {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	a := m.agentConsole()
	switch sub {
	case "":
		m.info("%s", m.agentSummary())
	case "on":
		if err := m.agentInit(); err != nil {
			m.fail(err)
			return nil
		}
		a.on = true
		m.ensureAgentPane()
		m.info("every line now goes to the agent; start one with ! to run it on %s, /agent off to stop", m.target)
	case "off":
		a.on = false
		m.info("lines run on the target again; a line starting with ? still asks the agent")
	case "new":
		if a.turn != nil {
			m.fail(errors.New("the agent is working; stop it with ctrl+c first"))
			return nil
		}
		if a.sess != nil {
			a.sess.Reset()
		}
		a.view.Clear()
		a.view.Notice("a new conversation")
		if a.pane != nil {
			a.pane.refresh(a.view)
		}
		m.info("a new conversation: the agent remembers nothing of the last one")
	case "resume":
		return m.agentResume(args)
	case "each":
		return m.agentEach(args)
	default:
		m.fail(fmt.Errorf("/agent %s: use /agent on|off|new|resume [ID]|each GROUP -- TASK", sub))
	}
	return nil
}

// agentSummary says what the agent is: model, conversation, tokens.
func (m *Model) agentSummary() string {
	a := m.ag
	if a == nil || a.sess == nil {
		cfg, err := agent.LoadConfig(m.opts.ConfigDir)
		if err == nil {
			cfg = cfg.With(m.opts.Agent.Overrides)
			err = cfg.Ready(os.Getenv)
		}
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("the agent is %s on %s; ask with ? QUESTION", cfg.Model, cfg.Provider)
	}
	u := a.sess.Usage()
	s := fmt.Sprintf("agent %s on %s · conversation %s · %s tokens", a.cfg.Model, a.cfg.Provider, a.sess.ID(), humanCount(u.TotalTokens))
	if u.Cost > 0 {
		s += fmt.Sprintf(" · $%.4f", u.Cost)
	}
	if a.on {
		s += " · every line goes to it (/agent off)"
	}
	if a.yolo {
		s += " · YOLO: nothing asks"
	}
	return s
}

// agentResume lists the kept conversations, or continues one.
func (m *Model) agentResume(args []string) tea.Cmd {
	if err := m.agentInit(); err != nil {
		m.fail(err)
		return nil
	}
	a := m.ag
	if a.turn != nil {
		m.fail(errors.New("the agent is working; stop it with ctrl+c first"))
		return nil
	}
	if a.store == nil {
		m.fail(errors.New("conversations are not kept: this console has no state directory"))
		return nil
	}
	convs, err := a.store.List()
	if err != nil {
		m.fail(err)
		return nil
	}
	if len(args) == 0 {
		if len(convs) == 0 {
			m.info("no conversation is kept yet")
			return nil
		}
		var lines []string
		for i, c := range convs {
			if i == 20 {
				lines = append(lines, fmt.Sprintf("… and %d older", len(convs)-20))
				break
			}
			lines = append(lines, fmt.Sprintf("%s  %s  %-16s  %s", c.ID, c.Updated.Local().Format("Jan 02 15:04"),
				cut(strings.Join(c.Targets, ","), 16), cut(c.Title, 48)))
		}
		lines = append(lines, "/agent resume ID continues one (tab completes the id)")
		m.msg = message{kind: msgOutput, lines: lines}
		return nil
	}
	id := args[0]
	if err := a.sess.Resume(id); err != nil {
		m.fail(err)
		return nil
	}
	m.ensureAgentPane()
	a.view.Clear()
	title := id
	for _, c := range convs {
		if c.ID == id {
			title = fmt.Sprintf("%s: %s (%s)", id, c.Title, plural(c.Turns, "turn", "turns"))
		}
	}
	a.view.Notice("resumed " + title)
	a.pane.refresh(a.view)
	m.info("resumed conversation %s", id)
	return nil
}

// agentEach is /agent each [--concurrency N] GROUP -- TASK: a loop per
// host, each routed to its own host.
func (m *Model) agentEach(args []string) tea.Cmd {
	conc := 0
	var spec string
	var task []string
	for i := 0; i < len(args); i++ {
		switch w := args[i]; {
		case w == "--":
			task = args[i+1:]
			i = len(args)
		case w == "--concurrency" || w == "-f":
			if i+1 >= len(args) {
				m.fail(errors.New("/agent each: --concurrency needs a number"))
				return nil
			}
			n, err := strconv.Atoi(args[i+1])
			if err != nil || n < 1 {
				m.fail(fmt.Errorf("/agent each: --concurrency %q: want a positive number", args[i+1]))
				return nil
			}
			conc, i = n, i+1
		case spec == "":
			spec = w
		default:
			task = args[i:]
			i = len(args)
		}
	}
	prompt := strings.TrimSpace(strings.Join(task, " "))
	if spec == "" || prompt == "" {
		m.fail(errors.New("usage: /agent each GROUP -- TASK (one agent loop per host of GROUP)"))
		return nil
	}
	if err := m.agentInit(); err != nil {
		m.fail(err)
		return nil
	}
	a := m.ag
	if a.turn != nil {
		m.fail(errors.New("the agent is still working; wait for it, or press ctrl+c to stop it"))
		return nil
	}
	targets, err := m.resolve(spec)
	if err != nil {
		m.fail(err)
		return nil
	}
	hosts := make([]string, len(targets))
	for i, t := range targets {
		hosts[i] = t.Name
	}
	m.ensureAgentPane()
	a.view.Prompt(fmt.Sprintf("each %s (%s): %s", spec, devices.Fold(hosts), prompt))
	ctx, cancel := context.WithCancel(m.ctx)
	a.turn = &agentTurn{prompt: prompt, each: true, started: m.now(), cancel: cancel}
	mark := m.signal.mark
	opts := agent.EachOptions{Session: m.agentOptions(), Target: spec, Hosts: hosts, Task: prompt, Concurrency: conc,
		Emit: func(e agent.Event) {
			if e.Type == agent.EventOutput {
				return
			}
			ev := e
			a.push(agentItem{ev: &ev}, mark)
		}}
	go func() {
		defer cancel()
		res := agent.RunEach(ctx, opts)
		a.push(agentItem{each: res}, mark)
	}()
	a.pane.refresh(a.view)
	return m.ensureTick()
}

// agentStatus is the status bar's word on the agent: its model, the
// tokens used (and cost), and YOLO while nothing asks.
func (m *Model) agentStatus() []string {
	a := m.ag
	if a == nil || a.sess == nil {
		if m.opts.Agent.Yolo {
			return []string{"YOLO"}
		}
		return nil
	}
	u := a.sess.Usage()
	s := a.cfg.Model
	if u.TotalTokens > 0 {
		s += " " + humanCount(u.TotalTokens) + " tok"
	}
	if u.Cost > 0 {
		s += fmt.Sprintf(" $%.2f", u.Cost)
	}
	out := []string{s}
	if a.turn != nil {
		out = append(out, "agent working")
	}
	if a.yolo {
		out = append(out, "YOLO")
	}
	return out
}

// humanCount writes 1234567 as 1.2M.
func humanCount(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", n/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return strconv.FormatInt(n, 10)
}

// agentShutdown stops the turn and every background job.
func (m *Model) agentShutdown() {
	if m.ag == nil {
		return
	}
	if m.ag.turn != nil {
		m.ag.turn.cancel()
	}
	if m.ag.ts != nil {
		go m.ag.ts.Close()
	}
}

// agentStyles are the transcript's styles from the theme.
func (m *Model) agentStyles() agentview.Styles {
	st := m.st
	return agentview.Styles{
		Prompt: st.Accent.Bold(true), Tool: st.Accent, Command: st.Text.Bold(true), Target: st.Pane.Title,
		Running: st.Warning, OK: st.Success, Fail: st.Error, Muted: st.Muted, Notice: st.Muted,
		Heading: st.Accent.Bold(true), Emph: lipgloss.NewStyle().Italic(true), Strong: lipgloss.NewStyle().Bold(true),
		Strike: lipgloss.NewStyle().Strikethrough(true), Code: st.Warning, CodeBlock: st.Text, Link: st.Accent.Underline(true),
		Quote: st.Muted, Rule: st.Muted,
		Plain: m.opts.NoColor,
	}
}

// agentPane is the agent's transcript in the main area.
type agentPane struct {
	keys   *KeyMap
	w, h   int
	lines  []string
	ver    uint64
	width  int
	follow bool
	top    int
}

func (p *agentPane) Title() string      { return "agent" }
func (p *agentPane) CapturesKeys() bool { return false }

func (p *agentPane) SetSize(w, h int) tea.Cmd {
	p.w, p.h = w, h
	return nil
}

// refresh takes the transcript's lines at the pane's width when they
// changed.
func (p *agentPane) refresh(v *agentview.View) {
	w := max(p.w-2, 10)
	if v.Version() == p.ver && w == p.width {
		return
	}
	p.lines, p.ver, p.width = v.Lines(w), v.Version(), w
}

func (p *agentPane) bodyHeight() int { return max(0, p.h-2) }

func (p *agentPane) maxTop() int { return max(0, len(p.lines)-p.bodyHeight()) }

func (p *agentPane) scroll(d int) {
	if p.follow {
		p.top = p.maxTop()
	}
	p.top = min(max(0, p.top+d), p.maxTop())
	p.follow = p.top == p.maxTop()
}

func (p *agentPane) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		page := max(1, p.bodyHeight()-1)
		switch {
		case key.Matches(msg, p.keys.PageUp):
			p.scroll(-page)
		case key.Matches(msg, p.keys.PageDown):
			p.scroll(page)
		case key.Matches(msg, p.keys.LineUp):
			p.scroll(-1)
		case key.Matches(msg, p.keys.LineDown):
			p.scroll(1)
		case key.Matches(msg, p.keys.Top):
			p.follow, p.top = false, 0
		case key.Matches(msg, p.keys.Bottom):
			p.follow = true
		}
	case tea.MouseWheelMsg:
		switch msg.Button {
		case tea.MouseWheelUp:
			p.scroll(-3)
		case tea.MouseWheelDown:
			p.scroll(3)
		}
	}
	return nil
}

func (p *agentPane) View(c *paneCtx) []string {
	w, h := p.w, p.h
	if w < 4 || h < 2 {
		return blankLines(max(w, 0), max(h, 0))
	}
	st := c.st
	border, title := st.Pane.Border, st.Pane.Title
	if c.focused {
		border, title = st.Pane.BorderFocused, st.Pane.TitleFocused
	}
	inner := w - 2
	top := p.top
	if p.follow {
		top = p.maxTop()
	}
	top = min(top, p.maxTop())
	end := min(len(p.lines), top+p.bodyHeight())
	body := make([]string, 0, h-2)
	for _, l := range p.lines[top:end] {
		if ansi.StringWidth(l) > inner {
			l = ansi.Truncate(l, inner, "")
		}
		body = append(body, l+spaces(inner-ansi.StringWidth(l)))
	}
	var foot boxSeg
	if below := len(p.lines) - end; below > 0 {
		foot = seg(st.Muted, fmt.Sprintf("↓ %d more", below))
	}
	return drawBox(border, w, h, seg(title, "agent"), boxSeg{}, foot, body)
}

// agentInterrupt is ctrl+c for the agent: with a turn running and the
// agent's pane (or nothing that runs) focused, it stops the turn. A host
// pane of one of its calls stops it through its task.
func (m *Model) agentInterrupt() bool {
	if m.ag == nil || m.ag.turn == nil {
		return false
	}
	if p := m.focusedPane(); p != nil && p != Pane(m.ag.pane) {
		if t := m.focusedTask(); t != nil && !t.Done() {
			return false
		}
	}
	return m.agentStop()
}
