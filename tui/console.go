package tui

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/internal/procmem"
	"github.com/rexconsole/rex/internal/server"
)

// Console is the console as the engine of the rex server
// (server.Console): one Model, run by a headless Bubble Tea program so
// that every Update and every command happens there whether or not a
// client is attached, and, per attached client, a Bubble Tea program of
// its own that decodes that client's keystrokes (forwarding them to the
// Model) and draws the Model's View for its terminal.
//
// The Model is laid out for the most recently active client (the last to
// type, resize or attach), as tmux's window-size latest; terminal panes
// follow that size; a client of another size sees the same frame cut or
// padded to its own.
type Console struct {
	rt   *consoleRuntime
	prog *tea.Program
	// onQuit runs once the console has quit, before its clients are told
	// and what runs is stopped: the server stops taking clients, so that
	// the next rex starts a fresh one.
	onQuit func()

	// mu guards the Model: the headless program's Update and the clients'
	// Views take it, and so do Status, Target and Stop.
	mu      sync.Mutex
	clients map[*client]bool
	active  *client
	current *client // the client whose message Update handles
	ended   bool
	// attaches counts the attaches so far (trimMsg).
	attaches uint64
	// afterLeft schedules the trimMsg a last detach sends (tea.Tick);
	// trim answers it, trimming when do is set (a test sees both).
	afterLeft func(d time.Duration, fn func(time.Time) tea.Msg) tea.Cmd
	trim      func(do bool)
	// gen counts the engine's Updates: a client's view drawn at the same
	// gen and size is still true.
	gen uint64
	// seq orders the clients' activity (client.seen).
	seq atomic.Int64
}

// NewConsole builds the console for the rex server.
func NewConsole(ctx context.Context, opts Options) (*Console, error) {
	if opts.Connector == nil {
		return nil, fmt.Errorf("the console needs a connector to reach targets")
	}
	c := &Console{rt: newRuntime(ctx, opts), clients: map[*client]bool{}, afterLeft: tea.Tick, trim: trimMemory}
	c.rt.m.host = c
	c.prog = tea.NewProgram(engineModel{c},
		tea.WithContext(ctx), tea.WithInput(nil), tea.WithOutput(io.Discard),
		tea.WithoutRenderer(), tea.WithoutSignalHandler(),
		// Bubble Tea's frame ticker runs even without a renderer; this
		// program never draws, so at 60 Hz it would only wake an idle
		// server 60 times a second.
		tea.WithFPS(1))
	return c, nil
}

// OnQuit sets what runs once the console has quit, before its clients
// are told and what runs in it is stopped.
func (c *Console) OnQuit(f func()) { c.onQuit = f }

// clientsGone bounds waiting for the clients to be told the console quit.
const clientsGone = 5 * time.Second

// Run runs the console until it quits (a client's quit, Stop) or ctx
// ends; then it detaches every client, stops what runs, and closes the
// connections.
func (c *Console) Run() error {
	defer c.rt.pool.Close()
	c.rt.start(c.prog.Send)
	_, err := c.prog.Run()
	c.mu.Lock()
	c.ended = true
	clients := c.clientList()
	c.mu.Unlock()
	if c.onQuit != nil {
		c.onQuit()
	}
	for _, cl := range clients {
		go cl.end(server.Detach{Reason: "the console quit: everything in it was stopped", Quit: true})
	}
	// One deadline for all: a timer's channel fires once, and a client
	// that reads nothing quits only once its connection closes, which
	// happens after Run.
	deadline := time.NewTimer(clientsGone)
	late := false
	for _, cl := range clients {
		if late {
			break
		}
		select {
		case <-cl.quit:
		case <-deadline.C:
			late = true
		}
	}
	deadline.Stop()
	c.rt.stop()
	return closeErr(c.rt.ctx, err)
}

func (c *Console) clientList() []*client {
	out := make([]*client, 0, len(c.clients))
	for cl := range c.clients {
		out = append(out, cl)
	}
	return out
}

// engineModel is the headless program's model: the Model under the
// Console's lock, with the clients' messages routed to it.
type engineModel struct{ c *Console }

// clientMsg is a message from a client's program.
type clientMsg struct {
	cl  *client
	msg tea.Msg
}

// attachMsg and leftMsg say that a client came or went.
type attachMsg struct{ cl *client }
type leftMsg struct{ cl *client }

// stopMsg ends the console (server.stop).
type stopMsg struct{}

// trimMsg comes trimAfter after the last client left; attaches is the
// count of attaches then, so that a trim waits for the last of several.
type trimMsg struct{ attaches uint64 }

// trimMemory hands back what the clients' frames and what ran meanwhile
// used of the heap, now rather than at the runtime's slow pace (one GC),
// and the pages of rex's binary that its start mapped and an idle server
// does not run. Both are best effort: a failure only leaves memory in use,
// nothing to tell the operator.
func trimMemory(do bool) {
	if do {
		go func() {
			debug.FreeOSMemory()
			procmem.ReleaseExecutable()
		}()
	}
}

// trimAfter lets a detach settle (the client's connection closed, the
// engine's last updates run) before the server gives memory back: the
// code that runs then would map again what a trim at once had released.
const trimAfter = 2 * time.Second

func (e engineModel) Init() tea.Cmd { return nil }

func (e engineModel) View() tea.View { return tea.View{} } // never drawn: the clients draw

func (e engineModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	c := e.c
	c.mu.Lock()
	m := c.rt.m
	var cmds []tea.Cmd
	update := func(msg tea.Msg) {
		_, cmd := m.Update(msg)
		cmds = append(cmds, cmd)
	}
	switch msg := msg.(type) {
	case attachMsg:
		c.clients[msg.cl] = true
		c.attaches++
		c.activate(msg.cl, update)
	case leftMsg:
		was := c.clients[msg.cl]
		delete(c.clients, msg.cl)
		if was && len(c.clients) == 0 {
			// Nobody draws until the next attach: once the detach has
			// settled, give memory back (trimMsg).
			attaches := c.attaches
			cmds = append(cmds, c.afterLeft(trimAfter, func(time.Time) tea.Msg { return trimMsg{attaches} }))
		}
		if c.active == msg.cl {
			c.active = nil
			// The most recent of the others, if any, takes over.
			var next *client
			for cl := range c.clients {
				if next == nil || cl.seen.Load() > next.seen.Load() {
					next = cl
				}
			}
			if next != nil {
				c.activate(next, update)
			}
		}
	case trimMsg:
		// Only when nobody has attached since.
		c.trim(len(c.clients) == 0 && c.attaches == msg.attaches)
	case clientMsg:
		if !c.clients[msg.cl] {
			break // it has gone
		}
		if size, ok := msg.msg.(tea.WindowSizeMsg); ok {
			// A resize is activity, as in tmux: the console (and its
			// terminal panes) take this client's size.
			msg.cl.setSize(size.Width, size.Height)
			c.activate(msg.cl, update)
			break
		}
		if c.active != msg.cl {
			c.activate(msg.cl, update)
		}
		msg.cl.seen.Store(c.seq.Add(1))
		c.current = msg.cl
		update(msg.msg)
		c.current = nil
	case stopMsg:
		cmds = append(cmds, m.quit())
	case tea.WindowSizeMsg:
		// The console's size is its active client's (activate). This one
		// is the headless program's own, 0×0 for want of a terminal, sent
		// from a goroutine as it starts: when it landed after an attach,
		// the client was drawn an empty screen until it typed.
	default:
		update(msg)
	}
	c.gen++
	clients := c.clientList()
	c.mu.Unlock()
	for _, cl := range clients {
		cl.poke()
	}
	return e, tea.Batch(cmds...)
}

// activate lays the console out for cl, and makes relative local paths
// and project tools start where cl's rex was started: the operator who
// typed the line means their own directory, not the one the server
// began in. c.mu is held.
func (c *Console) activate(cl *client, update func(tea.Msg)) {
	c.active = cl
	if cl.dir != "" {
		c.rt.m.workDir.set(cl.dir)
	}
	cl.seen.Store(c.seq.Add(1))
	w, h := cl.size()
	update(tea.WindowSizeMsg{Width: w, Height: h})
}

// Detach implements Host: the client whose key is being handled leaves.
func (c *Console) Detach(reason string) {
	if cl := c.current; cl != nil {
		go cl.end(server.Detach{Reason: reason})
	}
}

// Attach implements server.Console: it runs t as a client until it
// detaches, the connection ends (ctx) or the console quits.
func (c *Console) Attach(ctx context.Context, t *server.Terminal) server.Detach {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return server.Detach{Reason: "the console is quitting", Quit: true, Gone: true}
	}
	c.mu.Unlock()
	cl := &client{con: c, w: t.Cols, h: t.Rows, quit: make(chan struct{})}
	if filepath.IsAbs(t.Dir) {
		cl.dir = filepath.Clean(t.Dir)
	}
	opts := []tea.ProgramOption{
		tea.WithContext(ctx), tea.WithInput(t.In), tea.WithOutput(t.Out),
		tea.WithWindowSize(t.Cols, t.Rows), tea.WithEnvironment(t.Env), tea.WithoutSignalHandler(),
	}
	if p, ok := parseProfile(t.Profile); ok {
		opts = append(opts, tea.WithColorProfile(p))
	}
	cl.prog = tea.NewProgram(clientModel{cl}, opts...)
	go func() {
		for {
			select {
			case r := <-t.Resizes():
				cl.prog.Send(tea.WindowSizeMsg{Width: r.Cols, Height: r.Rows})
			case <-cl.quit:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	c.prog.Send(attachMsg{cl})
	_, err := cl.prog.Run()
	c.prog.Send(leftMsg{cl})
	cl.once.Do(func() { close(cl.quit) })
	cl.mu.Lock()
	d := cl.detach
	cl.mu.Unlock()
	if d.Reason == "" {
		d.Reason = "detached from the console"
		if err != nil && ctx.Err() == nil {
			d.Reason = "the console could not draw on this terminal: " + err.Error()
		}
	}
	return d
}

// parseProfile reads a colour profile's name as colorprofile writes it.
func parseProfile(s string) (colorprofile.Profile, bool) {
	for _, p := range []colorprofile.Profile{colorprofile.TrueColor, colorprofile.ANSI256, colorprofile.ANSI, colorprofile.Ascii, colorprofile.NoTTY} {
		if p.String() == s {
			return p, true
		}
	}
	return 0, false
}

// Status implements server.Console.
func (c *Console) Status() server.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.rt.m
	st := server.Status{Target: m.target, Clients: len(c.clients)}
	for _, t := range m.tasks.List() {
		if t.Done() {
			st.Finished++
			continue
		}
		ts := server.TaskStatus{Command: t.Command, Since: t.Started}
		for _, r := range t.Runs {
			ts.Targets = append(ts.Targets, r.Target)
			if r.Running() {
				ts.Running++
			}
		}
		st.Tasks = append(st.Tasks, ts)
	}
	for _, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok {
			if ph := tp.phase(); ph == termLive || ph == termOpening {
				st.Terminals = append(st.Terminals, server.TerminalStatus{Target: tp.Title(), Command: tp.task.command})
			}
		}
	}
	for _, name := range m.states.Names() {
		ct := m.states.Get(name)
		st.Connections = append(st.Connections, server.ConnStatus{Target: name, State: ct.Label()})
	}
	if m.ag != nil && m.ag.turn != nil {
		st.Agent = m.ag.turn.prompt
	}
	return st
}

// Target implements server.Console.
func (c *Console) Target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rt.m.target
}

// Stop implements server.Console.
func (c *Console) Stop(force bool) (server.Status, bool) {
	st := c.Status()
	if !force && st.Busy() {
		return st, false
	}
	go c.prog.Send(stopMsg{})
	return st, true
}

// client is one attached terminal.
type client struct {
	con  *Console
	prog *tea.Program

	dir string // its working directory (workDir); "" keeps the console's

	mu     sync.Mutex
	w, h   int
	detach server.Detach

	// The last view drawn, at which engine gen and size; only the
	// client's program touches them.
	view           tea.View
	drawn          bool
	drawnGen       uint64
	drawnW, drawnH int

	seen    atomic.Int64 // when it was last active
	poking  atomic.Bool  // a redraw is on its way to its program
	quit    chan struct{}
	once    sync.Once
	endOnce sync.Once
}

func (cl *client) size() (int, int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.w, cl.h
}

func (cl *client) setSize(w, h int) {
	cl.mu.Lock()
	cl.w, cl.h = w, h
	cl.mu.Unlock()
}

// redrawMsg asks a client's program to draw the console again.
type redrawMsg struct{}

// endMsg ends a client's program.
type endMsg struct{}

// poke has the client draw again, at most one request in flight.
func (cl *client) poke() {
	if cl.poking.Swap(true) {
		return
	}
	go cl.prog.Send(redrawMsg{})
}

// end detaches the client with d (its program quits, restoring the
// client's terminal).
func (cl *client) end(d server.Detach) {
	cl.endOnce.Do(func() {
		cl.mu.Lock()
		cl.detach = d
		cl.mu.Unlock()
		cl.prog.Send(endMsg{})
	})
}

// clientModel is a client's program's model: input goes to the console,
// the view is the console's.
type clientModel struct{ cl *client }

func (m clientModel) Init() tea.Cmd { return nil }

func (m clientModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cl := m.cl
	switch msg := msg.(type) {
	case redrawMsg:
		cl.poking.Store(false)
	case endMsg:
		return m, tea.Quit
	case tea.WindowSizeMsg, tea.KeyPressMsg, tea.KeyReleaseMsg, tea.PasteMsg, tea.PasteStartMsg, tea.PasteEndMsg,
		tea.MouseClickMsg, tea.MouseReleaseMsg, tea.MouseMotionMsg, tea.MouseWheelMsg:
		cl.con.prog.Send(clientMsg{cl: cl, msg: msg})
	}
	return m, nil
}

// View is the console's view for this client's terminal.
func (m clientModel) View() tea.View {
	cl := m.cl
	c := cl.con
	cw, ch := cl.size()
	c.mu.Lock()
	if cl.drawn && cl.drawnGen == c.gen && cl.drawnW == cw && cl.drawnH == ch {
		// Bubble Tea asks for the view after every message, a key sent on
		// to the engine included; nothing changed since the last one.
		c.mu.Unlock()
		return cl.view
	}
	gen := c.gen
	v := c.rt.m.View()
	w, h := c.rt.m.width, c.rt.m.height
	c.mu.Unlock()
	if w != cw || h != ch {
		v = fitView(v, w, h, cw, ch)
	}
	cl.view, cl.drawn, cl.drawnGen, cl.drawnW, cl.drawnH = v, true, gen, cw, ch
	return v
}

// fitView cuts or pads a view drawn at w×h to cw×ch, as tmux shows a
// window of another size.
func fitView(v tea.View, w, h, cw, ch int) tea.View {
	if v.Content == "" || w <= 0 || h <= 0 {
		return v
	}
	lines := strings.Split(v.Content, "\n")
	if len(lines) > ch {
		lines = lines[:ch]
	}
	for i, l := range lines {
		switch lw := ansi.StringWidth(l); {
		case lw > cw:
			lines[i] = ansi.Truncate(l, cw, "")
		case lw < cw:
			lines[i] = l + "\x1b[m" + strings.Repeat("·", cw-lw)
		}
	}
	for len(lines) < ch {
		lines = append(lines, strings.Repeat("·", cw))
	}
	v.Content = strings.Join(lines, "\n")
	if v.Cursor != nil && (v.Cursor.X >= cw || v.Cursor.Y >= ch) {
		v.Cursor = nil
	}
	return v
}
