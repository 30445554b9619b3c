package tui

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/themes"
	"github.com/rexconsole/rex/tui/dialog"
	"github.com/rexconsole/rex/tui/engine"
)

// frameInterval is the redraw period while output arrives or tasks run.
const frameInterval = 33 * time.Millisecond

// quitWindow is how soon a second ctrl+c on an idle command line must
// follow the first to quit; quitAfterCancel keeps a burst of ctrl+c that
// stopped a task from also closing the console.
const (
	quitWindow      = time.Second
	quitAfterCancel = 2 * time.Second
)

// runFunc runs a task on targets; fanout.Run over the console's pool, or a
// scripted stand-in in model tests.
type runFunc func(ctx context.Context, targets []fanout.Target, t fanout.Task, opts fanout.Options) *fanout.Summary

// frameMsg asks for a redraw; it comes from the frame tick.
type frameMsg time.Time

// wakeMsg starts the frame tick after the console was idle.
type wakeMsg struct{}

// frameSignal is how fan-out goroutines tell the UI that something
// changed without sending a message per chunk: they set dirty, and only
// the first change after an idle spell sends one wakeMsg.
type frameSignal struct {
	dirty   atomic.Bool
	pending atomic.Bool // a wake was sent or the tick is running
	send    atomic.Pointer[func(tea.Msg)]
}

func (f *frameSignal) mark() {
	f.dirty.Store(true)
	if f.pending.Load() || !f.pending.CompareAndSwap(false, true) {
		return
	}
	if send := f.send.Load(); send != nil {
		go (*send)(wakeMsg{})
	}
}

// msgKind says how the message area shows its text.
type msgKind int

const (
	msgNone msgKind = iota
	msgInfo
	msgError
	msgOutput
)

// message is the area above the command line: command output, a hint,
// or an error in one sentence.
type message struct {
	kind  msgKind
	lines []string
	// transient marks a message about a task (cancelling, its summary)
	// that the task's next news replaces.
	transient bool
	// notices marks lines from connections (a host key recorded): a
	// task's summary is added below them rather than replacing them.
	notices bool
}

// compState remembers a completion so that tab again cycles through the
// candidates.
type compState struct {
	value string // the input as completion left it
	start int
	cands []string
	idx   int
}

// searchState is a search being typed into the command line.
type searchState struct {
	pane  *outputPane
	draft string // the command line before the search
}

// verbRun is a verb whose output goes to the message area (/device,
// /tool list) in flight.
type verbRun struct {
	line    string
	started time.Time
	cancel  context.CancelFunc
}

// registryChangedMsg says devices.json changed on disk.
type registryChangedMsg struct{}

// verbDoneMsg carries a finished verb's output.
type verbDoneMsg struct {
	out string
	err error
	// reload asks for devices.json again: the verb may have changed it.
	reload bool
}

// workDir is where relative local paths of /push and /pull start and
// where the project's tools are looked for: the directory rex was started
// in, then, behind a rex server, the active client's (Console.activate).
// Verbs read it from their goroutines while an attach changes it.
type workDir struct {
	mu  sync.Mutex
	dir string
}

func (w *workDir) get() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dir
}

func (w *workDir) set(dir string) {
	w.mu.Lock()
	w.dir = dir
	w.mu.Unlock()
}

// Model is the console: one root model that owns every widget and routes
// every message. Panes, sidebar and command line are plain values drawn
// by it, not nested programs.
type Model struct {
	ctx      context.Context
	opts     Options
	app      *commands.App // for the verbs that reach targets themselves: push, pull, tool
	workDir  *workDir      // where relative local paths and project tools start
	push     pushFunc      // commands.PushTargets; scripted in view tests
	pull     pullFunc      // commands.PullFrom; scripted in view tests
	run      runFunc
	openTerm openTermFunc // opens remote terminals; nil without connections
	now      func() time.Time
	seed     maphash.Seed
	signal   *frameSignal
	// resolveTargets is opts.Resolver's function, telling folds.add what
	// it folded; nil without one.
	resolveTargets func(spec string) ([]fanout.Target, error)
	// folds holds what resolving TARGETS folded, for the message area:
	// resolve may run off the event loop (the agent's tools), so Update
	// shows them.
	folds *foldNotes

	cfg      Config
	keys     KeyMap
	st       *Styles
	styleGen int
	help     help.Model

	width, height int
	geo           geometry // the layout, computed by relayout in Update

	reg    *devices.Registry
	known  []sidebarEntry   // local, devices and groups of reg, for the sidebar
	states *engine.Contacts // what the last contact with each target said

	target      string // a TARGETS expression; "local" at first
	targetCount int
	input       lineEditor
	hist        *history
	comp        compState

	panes     []Pane
	focus     int
	zoom      bool
	layout    string
	tasks     *engine.Tasks // every command run this session
	reported  map[*engine.Task]bool
	nextID    int
	gather    *gatherView // the gathered view filling the main area, or nil
	gatherOn  bool        // new commands on several targets open gathered
	broadcast *termTask   // the terminals every keystroke goes to, or nil
	attaching *termTask   // the newest /attach, until one of its terminals is live

	msg        message
	dialogs    dialog.Stack // the dialogs over the main view, the front one last
	dialogDone map[string]dialogDone
	helpOpen   bool
	helpTop    int
	search     *searchState
	secret     *secretPrompt // a masked question (a sudo password) holds the command line
	verb       *verbRun
	ticking    bool
	quitting   bool

	hostKeyAsks int    // host key questions asked, for dialog ids
	rolling     string // the status line's word on a rolling run, set each frame

	lastIdleCtrlC time.Time
	lastCancel    time.Time

	// ag is the agent of `?` lines and /agent (agent.go), nil until used.
	ag *agentConsole

	// host is the rex server running this console for its clients, nil
	// when the console is the whole program (rex --no-server).
	host Host
}

// Host is what runs the console when it is not the whole program: the
// rex server (console.go), whose clients attach and detach.
type Host interface {
	// Detach ends the attachment of the client whose key is being
	// handled; the console runs on.
	Detach(reason string)
}

// newModel builds the console's model. run is how tasks run; now is the
// clock (tests fix both).
func newModel(ctx context.Context, opts Options, run runFunc, now func() time.Time) *Model {
	m := &Model{
		ctx:    ctx,
		opts:   opts,
		run:    run,
		now:    now,
		seed:   maphash.MakeSeed(),
		signal: &frameSignal{},
		folds:  &foldNotes{shown: map[string]bool{}},
		cfg:    defaultConfig(),
		keys:   DefaultKeyMap(),
		help:   help.New(),
		target: commands.LocalName,
		layout: layoutGrid,

		tasks:    &engine.Tasks{},
		reported: map[*engine.Task]bool{},
	}
	m.setRegistry(devices.New())
	m.states = engine.NewContacts(now, m.signal.mark)
	if opts.Secrets != nil {
		opts.Secrets.attach(m.signal.mark)
	}
	var startup []string

	m.workDir = &workDir{dir: opts.WorkDir}
	if opts.WorkDir == "" {
		wd, err := os.Getwd()
		if err != nil {
			startup = append(startup, fmt.Sprintf("cannot tell the working directory (%v); give /push and /pull absolute local paths", err))
		}
		m.workDir.set(wd)
	}
	if opts.Resolver != nil {
		m.resolveTargets = opts.Resolver(m.folds.add)
	}
	m.app = &commands.App{Resolve: m.resolve, ConfigDir: opts.ConfigDir, CacheDir: opts.CacheDir, StateDir: opts.StateDir, WorkDir: m.workDir.get}
	m.push, m.pull = commands.PushTargets, commands.PullFrom
	if opts.CacheDir != "" {
		m.app.CASDir = filepath.Join(opts.CacheDir, "cas")
	}

	cfg, err := loadConfig(opts.ConfigDir)
	if err != nil {
		startup = append(startup, err.Error())
	}
	m.cfg = cfg
	m.layout = cfg.Layout
	if err := m.keys.apply(cfg.Keys); err != nil {
		startup = append(startup, err.Error())
	}

	th, err := themes.Load(cfg.Theme, m.themeDir())
	if err != nil {
		startup = append(startup, err.Error()+"; using the dark theme")
		th = themes.MustDefault()
	}
	m.setTheme(th)

	histPath := ""
	if opts.StateDir != "" {
		histPath = opts.StateDir + "/" + HistoryFile
	}
	m.hist, err = loadHistory(histPath)
	if err != nil {
		startup = append(startup, err.Error())
	}

	m.reloadRegistry()
	if t, err := m.resolve(m.target); err == nil {
		m.targetCount = len(t)
	}
	if len(startup) > 0 {
		m.msg = message{kind: msgError, lines: startup}
	}
	return m
}

func (m *Model) themeDir() string {
	if m.opts.ConfigDir == "" {
		return ""
	}
	return m.opts.ConfigDir + "/themes"
}

func (m *Model) setTheme(th themes.Theme) {
	m.styleGen++
	m.st = NewStyles(th, m.styleGen, m.opts.NoColor)
	m.help.Styles = m.st.Help
	if m.ag != nil {
		m.ag.view.SetStyles(m.agentStyles())
	}
}

// reloadRegistry reads devices.json again for the sidebar and completion.
func (m *Model) reloadRegistry() {
	if m.opts.Store == nil {
		return
	}
	reg, err := m.opts.Store.Load()
	if err != nil {
		m.fail(err)
		return
	}
	m.setRegistry(reg)
}

// setRegistry takes a new registry snapshot and lists its targets for
// the sidebar once, not at every frame.
func (m *Model) setRegistry(reg *devices.Registry) {
	m.reg = reg
	if m.target != "" {
		// A group's members may have changed.
		if t, err := m.resolve(m.target); err == nil {
			m.targetCount = len(t)
		}
	}
	m.known = []sidebarEntry{{name: commands.LocalName, kind: "local", addr: "this machine"}}
	for _, d := range reg.Devices() {
		m.known = append(m.known, sidebarEntry{name: d.Name, kind: "device", addr: d.Addr()})
	}
	for _, g := range reg.Groups() {
		m.known = append(m.known, sidebarEntry{name: g.Name, kind: "group", members: len(g.Members)})
	}
}

func (m *Model) resolve(spec string) ([]fanout.Target, error) {
	if m.resolveTargets != nil {
		return m.resolveTargets(spec)
	}
	if strings.TrimSpace(spec) == commands.LocalName {
		return []fanout.Target{commands.LocalTarget()}, nil
	}
	return nil, fmt.Errorf("cannot resolve %q: this console has no device registry", spec)
}

// Init starts nothing: output and keys drive everything.
func (m *Model) Init() tea.Cmd { return nil }

// Update routes a message to the widget it is for, then lays the screen
// out again: View only draws what Update laid out.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	m.showFolds()
	return m, tea.Batch(cmd, m.relayout())
}

// foldNotes queues the lines saying what TARGETS folded, each shown once
// per console.
type foldNotes struct {
	mu      sync.Mutex
	pending []string
	shown   map[string]bool
}

// add is the Resolver's notice: it queues note unless it was shown.
func (f *foldNotes) add(note string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.shown[note] {
		f.shown[note] = true
		f.pending = append(f.pending, note)
	}
}

func (f *foldNotes) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pending
	f.pending = nil
	return p
}

// showFolds puts what resolving TARGETS folded in the message area: below
// the answer of the command that resolved them (/target's), else as a
// notice.
func (m *Model) showFolds() {
	for _, n := range m.folds.take() {
		if m.msg.kind == msgInfo && !m.msg.notices && !m.msg.transient && len(m.msg.lines) > 0 {
			m.msg.lines = append(m.msg.lines, n)
			continue
		}
		m.notice(n)
	}
}

func (m *Model) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
	case wakeMsg:
		return m.ensureTick()
	case frameMsg:
		return m.onFrame(time.Time(msg))
	case resizeDueMsg:
		return msg.pane.resizeDue(msg.seq)
	case verbDoneMsg:
		return m.verbDone(msg)
	case registryChangedMsg:
		m.reloadRegistry()
	case noticeMsg:
		m.notice(msg.text)
	case hostKeyAskMsg:
		m.askHostKey(msg)
	case tea.KeyPressMsg:
		return m.onKey(msg)
	case fullscreenDoneMsg:
		return m.fullscreenDone(msg)
	case tea.MouseClickMsg:
		if !m.terminalMouse(mousePress, tea.Mouse(msg)) {
			m.onClick(msg)
		}
	case tea.MouseReleaseMsg:
		m.terminalMouse(mouseRelease, tea.Mouse(msg))
	case tea.MouseMotionMsg:
		m.terminalMouse(mouseMotion, tea.Mouse(msg))
	case tea.MouseWheelMsg:
		if !m.terminalMouse(mouseWheel, tea.Mouse(msg)) {
			m.onWheel(msg)
		}
	case tea.PasteMsg:
		if p := m.typing(); p != nil {
			m.pasteInto(p, msg.Content)
			return nil
		}
		if m.secret != nil {
			m.secretPaste(msg.Content)
			return nil
		}
		if m.dialogs.Len() > 0 {
			return nil
		}
		if p := m.keyPane(); p != nil {
			m.pasteInto(p, msg.Content)
			return nil
		}
		// A pasted block is one line here: newlines would submit half of it.
		msg.Content = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(msg.Content)
		m.input.Update(msg)
		if m.search != nil {
			m.search.pane.Search(m.input.Value())
		}
	}
	return nil
}

// ensureTick starts the frame tick unless it runs.
func (m *Model) ensureTick() tea.Cmd {
	if m.ticking {
		return nil
	}
	m.ticking = true
	m.signal.pending.Store(true)
	return tickCmd()
}

func tickCmd() tea.Cmd {
	return tea.Tick(frameInterval, func(t time.Time) tea.Msg { return frameMsg(t) })
}

// onFrame is one frame: note finished tasks, refresh a gathered view,
// and keep ticking while anything changes or runs.
func (m *Model) onFrame(time.Time) tea.Cmd {
	m.agentFrame()
	now := m.now()
	m.pollSecret()
	ended := false
	for _, t := range m.tasks.List() {
		if t.Done() && !m.reported[t] {
			m.reported[t], ended = true, true
			switch {
			case m.msg.kind == msgNone || m.msg.transient:
				m.msg = message{kind: msgInfo, lines: []string{t.SummaryLine()}, transient: true}
			case m.msg.notices:
				m.msg = message{kind: msgInfo, lines: append(m.msg.lines, t.SummaryLine()), transient: true}
			}
		}
	}
	if ended {
		m.tasks.Retain(retainFactor*m.cfg.Scrollback, m.shown)
	}
	m.refreshTasks()
	m.rolling = m.rollingStatus()
	if d, ok := m.dialogs.Get(quitDialog).(*dialog.Confirm); ok && m.host != nil {
		d.SetText(m.leaveText())
	} else if ok {
		if text := m.runningWork(); text != nil {
			d.SetText(text)
		} else {
			d.SetText([]string{"Nothing runs any more."})
		}
	}
	if m.gather != nil {
		m.gather.refresh(now, &m.keys, m)
	}
	m.settleAttach()
	// A terminal that ended gives the keys back to the command line.
	if tp, ok := m.focusedPane().(*ptyPane); ok && tp.attached && m.keyPane() == nil {
		tp.setAttached(false)
	}
	if m.signal.dirty.Swap(false) || m.busy() {
		return tickCmd()
	}
	m.ticking = false
	m.signal.pending.Store(false)
	// A change that raced the line above must not be lost.
	if m.signal.dirty.Load() {
		return m.ensureTick()
	}
	return nil
}

// retainFactor × scrollback is how many lines the output of finished
// tasks that no pane shows may take, newest first (engine.Tasks.Retain):
// /tasks reopens them; older ones keep only their status.
const retainFactor = 10

// shown reports whether a pane shows task t.
func (m *Model) shown(t *engine.Task) bool {
	if m.gather != nil && m.gather.task == t {
		return true
	}
	for _, p := range m.panes {
		op, ok := p.(*outputPane)
		switch {
		case !ok:
		case op.run != nil && op.run.Task == t:
			return true
		case op.tr != nil:
			for _, r := range op.tr.Runs() {
				if r.Task == t {
					return true
				}
			}
		}
	}
	return false
}

// busy reports whether anything is in flight that the frame should show.
func (m *Model) busy() bool {
	if m.verb != nil {
		return true
	}
	if m.runningTasks() > 0 || m.agentBusy() {
		return true
	}
	for _, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok && tp.phase() == termOpening {
			return true // its spinner turns
		}
	}
	return false
}

func (m *Model) runningTasks() int { return len(m.tasks.Running()) }

// rollingStatus is the status line's word on a rolling run (/run --batch,
// --canary) still running, the latest one: "batch 2/3 web[3-4]"; "" when
// none rolls.
func (m *Model) rollingStatus() string {
	running := m.tasks.Running()
	for i := len(running) - 1; i >= 0; i-- {
		if b, ok := running[i].Batch(); ok {
			what := "batch"
			if b.Canary {
				what = "canary"
			}
			return fmt.Sprintf("%s %d/%d %s", what, b.Index, b.Count, cut(devices.Fold(b.Targets), 30))
		}
	}
	return ""
}

// info shows a message; fail shows an error.
func (m *Model) info(format string, args ...any) {
	m.msg = message{kind: msgInfo, lines: strings.Split(fmt.Sprintf(format, args...), "\n")}
}

func (m *Model) fail(err error) {
	m.msg = message{kind: msgError, lines: []string{errorText(err)}}
}

// errorText is an error as the operator sees it.
func errorText(err error) string {
	var ee *commands.ExitError
	if errors.As(err, &ee) && ee.Err == nil {
		return fmt.Sprintf("the command ended with status %d", ee.Code)
	}
	return err.Error()
}

// onKey routes a key press: console keys first, then a search being
// typed, then pane keys, then the command line.
func (m *Model) onKey(msg tea.KeyPressMsg) tea.Cmd {
	k := &m.keys
	// A live terminal with the keys keeps them when a question opens by
	// itself (a host key or the agent's consent for a connection in the
	// background, a sudo password): the "y" of "yum" must not answer it.
	// The question waits for ctrl+], and the status line says so.
	if p := m.typing(); p != nil {
		m.terminalKey(p, msg)
		return nil
	}
	if m.secret != nil {
		return m.secretKey(msg)
	}
	if m.dialogs.Len() > 0 {
		return m.dialogKey(msg)
	}
	if m.helpOpen {
		return m.helpKey(msg)
	}
	// A terminal pane with the keys gets every key but the one that
	// gives them back.
	if p := m.keyPane(); p != nil {
		m.terminalKey(p, msg)
		return nil
	}
	switch {
	case key.Matches(msg, k.Quit):
		return m.requestQuit()
	case key.Matches(msg, k.Cancel):
		return m.interrupt()
	case key.Matches(msg, k.Help):
		m.helpOpen, m.helpTop = true, 0
		return nil
	case key.Matches(msg, k.Tasks):
		m.openTasks()
		return nil
	}
	if m.search != nil {
		return m.searchKey(msg)
	}
	completing := m.comp.cands != nil && m.input.Value() == m.comp.value
	if !key.Matches(msg, k.Complete) {
		m.comp = compState{}
	}
	switch {
	case key.Matches(msg, k.EnterPane) && m.input.Value() == "" && m.focusedTerm() != nil && m.gather == nil:
		return m.enterPane(m.focusedTerm())
	case key.Matches(msg, k.Submit):
		return m.submit()
	case key.Matches(msg, k.Broadcast):
		if err := m.toggleBroadcast(); err != nil {
			m.fail(err)
		}
	case key.Matches(msg, k.FullScreen):
		return m.fullscreen()
	case key.Matches(msg, k.Complete) && (m.input.Value() != "" || completing):
		m.complete()
	case key.Matches(msg, k.NextPane):
		m.cycleFocus(1)
	case key.Matches(msg, k.PrevPane):
		m.cycleFocus(-1)
	case key.Matches(msg, k.HistoryPrev):
		if s, ok := m.hist.Prev(m.input.Value()); ok {
			m.input.SetValue(s)
			m.input.CursorEnd()
		}
	case key.Matches(msg, k.HistoryNext):
		if s, ok := m.hist.Next(); ok {
			m.input.SetValue(s)
			m.input.CursorEnd()
		}
	case key.Matches(msg, k.Zoom):
		m.toggleZoom()
	case key.Matches(msg, k.Gather):
		if err := m.toggleGather(); err != nil {
			m.fail(err)
		}
	case key.Matches(msg, k.Search):
		m.startSearch()
	case key.Matches(msg, k.Clear):
		m.clearPanes(false)
	case key.Matches(msg, k.PageUp, k.PageDown, k.LineUp, k.LineDown, k.Top, k.Bottom, k.TermScrollUp, k.TermScrollDown):
		if p := m.activePane(); p != nil {
			return p.Update(msg)
		}
	case key.Matches(msg, k.TargetPrev):
		m.moveTarget(-1)
	case key.Matches(msg, k.TargetNext):
		m.moveTarget(1)
	case key.Matches(msg, k.Escape):
		m.escape()
	default:
		m.input.Update(msg)
	}
	return nil
}

// interrupt is ctrl+c: it cancels the focused task; otherwise it clears
// the line; on an idle, empty line, twice in a row, it quits.
func (m *Model) interrupt() tea.Cmd {
	now := m.now()
	if m.agentInterrupt() {
		m.lastCancel, m.lastIdleCtrlC = now, time.Time{}
		return m.ensureTick()
	}
	if t := m.focusedTask(); t != nil && t.Stop() {
		m.lastCancel, m.lastIdleCtrlC = now, time.Time{}
		m.info("cancelling %s on %s", cut(t.Command, 40), plural(len(t.Runs), "target", "targets"))
		m.msg.transient = true
		return m.ensureTick()
	}
	if m.verb != nil {
		m.verb.cancel()
		m.lastCancel = now
		return nil
	}
	if m.search != nil {
		m.endSearch(false)
		return nil
	}
	if m.input.Value() != "" {
		m.input.SetValue("")
		m.hist.reset()
		m.comp = compState{}
		return nil
	}
	if !m.lastIdleCtrlC.IsZero() && now.Sub(m.lastIdleCtrlC) <= quitWindow && now.Sub(m.lastCancel) > quitAfterCancel {
		return m.requestQuit()
	}
	m.lastIdleCtrlC = now
	m.info("press ctrl+c again to quit (or ctrl+q, or /quit); ctrl+c stops the focused pane's task")
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// quit stops every task and ends the program; Run waits for the tasks.
func (m *Model) quit() tea.Cmd {
	m.quitting = true
	m.agentShutdown()
	for _, t := range m.tasks.List() {
		t.Stop()
	}
	for _, p := range m.panes {
		if tp, ok := p.(*ptyPane); ok {
			tp.shutdown()
		}
	}
	if m.verb != nil {
		m.verb.cancel()
	}
	return tea.Quit
}

// escape backs out of one thing: zoom or the gathered view, then the
// message area.
func (m *Model) escape() {
	switch {
	case m.gather != nil:
		m.gather, m.gatherOn = nil, false
	case m.zoom:
		m.zoom = false
	default:
		m.msg = message{}
	}
}

func (m *Model) helpKey(msg tea.KeyPressMsg) tea.Cmd {
	k := &m.keys
	switch {
	case key.Matches(msg, k.Quit):
		m.helpOpen = false
		return m.requestQuit()
	case key.Matches(msg, k.Escape, k.Help, k.Cancel, k.Submit):
		m.helpOpen = false
	case key.Matches(msg, k.PageDown):
		m.helpTop += 10
	case key.Matches(msg, k.PageUp):
		m.helpTop = max(0, m.helpTop-10)
	case key.Matches(msg, k.HistoryNext, k.LineDown):
		m.helpTop++
	case key.Matches(msg, k.HistoryPrev, k.LineUp):
		m.helpTop = max(0, m.helpTop-1)
	}
	return nil
}

// submit runs the command line.
func (m *Model) submit() tea.Cmd {
	line := m.input.Value()
	m.input.SetValue("")
	m.comp = compState{}
	m.msg = message{}
	if err := m.hist.Add(line); err != nil {
		m.fail(err)
	}
	line = strings.TrimSpace(line)
	if line == "" {
		return nil
	}
	if isSlashCommand(line) {
		return m.slash(line)
	}
	if q, ok := strings.CutPrefix(line, "?"); ok {
		return m.askAgent(q)
	}
	if m.ag != nil && m.ag.on {
		if cmd, ok := strings.CutPrefix(line, "!"); ok {
			return m.runOnTarget(strings.TrimSpace(cmd))
		}
		return m.askAgent(line)
	}
	return m.runOnTarget(line)
}

// isSlashCommand tells a slash command from a shell command that starts
// with a path: "/usr/bin/uptime" runs, "/run ..." is a command.
func isSlashCommand(line string) bool {
	if !strings.HasPrefix(line, "/") {
		return false
	}
	first, _, _ := strings.Cut(line, " ")
	return !strings.Contains(first[1:], "/")
}

// runOnTarget runs a shell command line on the current target, in the
// target's panes.
func (m *Model) runOnTarget(line string) tea.Cmd {
	targets, err := m.resolve(m.target)
	if err != nil {
		m.fail(fmt.Errorf("the target %s: %w", m.target, err))
		return nil
	}
	_, cmd := m.startTask(m.target, line, targets, m.fanJob(targets, commands.TaskFor([]string{line}), m.cfg.Concurrency))
	return cmd
}

// fanJob runs one command on targets through the fan-out engine.
func (m *Model) fanJob(targets []fanout.Target, ft fanout.Task, concurrency int) engine.Job {
	return m.fanJobWith(targets, ft, fanout.Options{Concurrency: concurrency})
}

// fanJobWith is fanJob with every option of a run (/run's flags: rolling,
// connect timeout).
func (m *Model) fanJobWith(targets []fanout.Target, ft fanout.Task, opts fanout.Options) engine.Job {
	run := m.run
	return func(ctx context.Context, onEvent func(fanout.Event)) *fanout.Summary {
		o := opts
		o.OnEvent = onEvent
		return run(ctx, targets, ft, o)
	}
}

// startTask runs job on targets in the background, shown by newTask's
// panes, drawn by the frame tick.
func (m *Model) startTask(spec, display string, targets []fanout.Target, job engine.Job) (*engine.Task, tea.Cmd) {
	if len(targets) == 0 {
		m.fail(fmt.Errorf("%s names no targets; add devices to it first", spec))
		return nil, nil
	}
	t := m.newTask(spec, display, targets, spec == m.target)
	m.runJob(t, job)
	return t, m.ensureTick()
}

// runJob runs a task's job in the background; the frame tick draws it.
func (m *Model) runJob(t *engine.Task, job engine.Job) {
	t.Start(job, m.now, m.signal.mark)
}

// newTask puts a task on the list and shows it: in the target's panes
// (one per host, reused while the target stays the same, each reading
// like that host's terminal history) when inTarget is set, else in panes
// of its own. The focus goes to its first pane.
func (m *Model) newTask(spec, display string, targets []fanout.Target, inTarget bool) *engine.Task {
	names := make([]string, len(targets))
	for i, tg := range targets {
		names[i] = tg.Name
	}
	t := m.tasks.New(m.ctx, display, spec, names, m.now(), m.cfg.Scrollback, m.seed, m.signal.mark)
	if inTarget {
		m.showInTarget(t)
	} else {
		m.showTask(t)
	}
	if m.gatherOn && len(t.Runs) > 1 {
		m.gather = &gatherView{task: t}
		m.gather.refresh(m.now(), &m.keys, m)
	} else {
		m.gather = nil
	}
	return t
}

// targetPanes are the open panes of the target spec, by host.
func (m *Model) targetPanes(spec string) map[string]int {
	out := map[string]int{}
	for i, p := range m.panes {
		if op, ok := p.(*outputPane); ok && op.tr != nil && op.tr.Spec == spec {
			out[op.tr.Host] = i
		}
	}
	return out
}

// showInTarget appends t's runs to the target's panes, opening panes for
// hosts that have none yet.
func (m *Model) showInTarget(t *engine.Task) {
	first, mine, opened := m.addToTarget(t)
	if opened {
		m.zoom = false
	}
	if !mine {
		// The focus stays on a host of the target the operator looks at.
		m.setFocus(first, false)
	}
}

// addToTarget appends t's runs to the target's panes, opening panes for
// hosts that have none yet, and leaves the focus and the layout as they
// are. It says which pane comes first, whether one of them has the focus,
// and whether any was opened.
func (m *Model) addToTarget(t *engine.Task) (first int, mine, opened bool) {
	have := m.targetPanes(t.Spec)
	first = -1
	for _, r := range t.Runs {
		i, ok := have[r.Target]
		if !ok {
			i = len(m.panes)
			m.panes = append(m.panes, newTranscriptPane(engine.NewTranscript(t.Spec, r.Target, m.cfg.Scrollback), &m.keys))
			opened = true
		}
		p := m.panes[i].(*outputPane)
		p.tr.Add(r)
		p.follow = true // a new command shows, as in a terminal
		if first < 0 || i < first {
			first = i
		}
		mine = mine || i == m.focus
	}
	return first, mine, opened
}

// showTask opens a pane per run of t.
func (m *Model) showTask(t *engine.Task) {
	first := len(m.panes)
	for _, r := range t.Runs {
		m.panes = append(m.panes, newRunPane(r, &m.keys))
	}
	m.setFocus(first, false)
	m.zoom = false
}

// focusedPane is the pane with focus, or nil.
func (m *Model) focusedPane() Pane {
	if m.focus < 0 || m.focus >= len(m.panes) {
		return nil
	}
	return m.panes[m.focus]
}

// activePane is the pane keys act on: the gathered view while shown,
// else the focused pane.
func (m *Model) activePane() Pane {
	if m.gather != nil && m.gather.pane != nil {
		return m.gather.pane
	}
	return m.focusedPane()
}

// focusedTask is the task of the focused pane (a target's pane: its
// newest running command), or nil.
func (m *Model) focusedTask() *engine.Task {
	if m.gather != nil {
		return m.gather.task
	}
	if p, ok := m.focusedPane().(*outputPane); ok {
		return p.task()
	}
	return nil
}

func (m *Model) cycleFocus(d int) {
	if len(m.panes) == 0 {
		return
	}
	m.gather, m.gatherOn = nil, false
	m.setFocus((m.focus+d+len(m.panes))%len(m.panes), false)
}

// toggleZoom shows the focused pane alone, or all of them again; it
// reports false when there is no pane.
func (m *Model) toggleZoom() bool {
	if len(m.panes) == 0 {
		return false
	}
	m.gather, m.gatherOn = nil, false
	m.zoom = !m.zoom
	return true
}

// toggleGather shows the gathered view of the focused task and keeps it
// on for the commands that follow, or turns it off.
func (m *Model) toggleGather() error {
	if m.gather != nil {
		m.gather, m.gatherOn = nil, false
		return nil
	}
	if err := m.showGather(m.focusedTask()); err != nil {
		return err
	}
	m.gatherOn = true
	return nil
}

// showGather shows the gathered view of t.
func (m *Model) showGather(t *engine.Task) error {
	if t == nil || len(t.Runs) < 2 {
		return errors.New("the gathered view is for a command that ran on several targets; focus one of its panes (tab), or run one with /run GROUP -- CMD")
	}
	m.gather = &gatherView{task: t}
	m.gather.refresh(m.now(), &m.keys, m)
	return nil
}

// clearPanes empties the focused pane, or every pane.
func (m *Model) clearPanes(all bool) int {
	n := 0
	for i, p := range m.panes {
		if all || i == m.focus {
			if c, ok := p.(interface{ Clear() }); ok {
				c.Clear()
				n++
			}
		}
	}
	return n
}

// closePane removes pane i; a task whose panes are all gone is forgotten.
func (m *Model) closePane(i int) {
	p := m.panes[i]
	m.panes = append(m.panes[:i:i], m.panes[i+1:]...)
	if m.focus > i || m.focus >= len(m.panes) {
		m.focus = max(0, m.focus-1)
	}
	if tp, ok := p.(*ptyPane); ok {
		m.forgetTerm(tp)
	}
	// A task stays on the task list (/tasks opens it again).
	if len(m.panes) == 0 {
		m.zoom = false
	}
}

// errNoSearch says why pane p cannot be searched.
func errNoSearch(p Pane) error {
	if _, ok := p.(*ptyPane); ok {
		return errors.New("search is for command output; a terminal pane's history scrolls with pgup/pgdn (after ctrl+] while typing in it)")
	}
	return errors.New("there is no pane to search; run a command first")
}

// startSearch turns the command line into a search of the active pane.
func (m *Model) startSearch() {
	p, ok := m.activePane().(*outputPane)
	if !ok {
		m.fail(errNoSearch(m.activePane()))
		return
	}
	m.search = &searchState{pane: p, draft: m.input.Value()}
	m.input.SetValue(p.query)
	m.input.CursorEnd()
}

func (m *Model) endSearch(keep bool) {
	s := m.search
	m.search = nil
	if !keep {
		s.pane.Search("")
	}
	m.input.SetValue(s.draft)
	m.input.CursorEnd()
	if keep && s.pane.query != "" {
		m.info("%s: %s (ctrl+f searches again, esc there clears it)", s.pane.query, s.pane.SearchStatus())
	}
}

func (m *Model) searchKey(msg tea.KeyPressMsg) tea.Cmd {
	k := &m.keys
	p := m.search.pane
	switch {
	case key.Matches(msg, k.Escape):
		m.endSearch(false)
	case key.Matches(msg, k.Submit):
		m.endSearch(true)
	case key.Matches(msg, k.HistoryPrev, k.Search):
		p.SearchNext(true)
	case key.Matches(msg, k.HistoryNext):
		p.SearchNext(false)
	case key.Matches(msg, k.PageUp, k.PageDown, k.LineUp, k.LineDown, k.Top, k.Bottom):
		return p.Update(msg)
	default:
		before := m.input.Value()
		m.input.Update(msg)
		if v := m.input.Value(); v != before {
			p.Search(v)
		}
	}
	return nil
}

// complete is tab on a non-empty line: one candidate is inserted; several
// insert their common prefix and are listed; tab again cycles through
// them.
func (m *Model) complete() {
	value := []rune(m.input.Value())
	pos := min(m.input.Position(), len(value))
	before, after := string(value[:pos]), string(value[pos:])
	if m.comp.cands != nil && m.input.Value() == m.comp.value {
		c := &m.comp
		c.idx = (c.idx + 1) % len(c.cands)
		v := before[:c.start] + c.cands[c.idx]
		m.input.SetValue(v + after)
		m.input.SetCursor(len([]rune(v)))
		c.value = m.input.Value()
		return
	}
	c := completeLine(before, m.compSource())
	switch len(c.cands) {
	case 0:
		return
	case 1:
		v := before[:c.start] + c.cands[0] + " "
		m.input.SetValue(v + after)
		m.input.SetCursor(len([]rune(v)))
		return
	}
	lcp := commonPrefix(c.cands)
	v := before[:c.start] + lcp
	m.input.SetValue(v + after)
	m.input.SetCursor(len([]rune(v)))
	m.info("%s", strings.Join(c.cands, "  "))
	m.comp = compState{value: m.input.Value(), start: c.start, cands: c.cands, idx: -1}
	if lcp == c.word {
		// Nothing to add: this tab starts cycling.
		m.complete()
	}
}

func (m *Model) compSource() compSource {
	m.reloadRegistryQuiet()
	src := compSource{}
	for _, c := range slashCommands() {
		src.commands = append(src.commands, "/"+c.name)
	}
	for _, d := range m.reg.Devices() {
		src.devices = append(src.devices, d.Name)
	}
	for _, g := range m.reg.Groups() {
		src.groups = append(src.groups, g.Name)
	}
	infos, _ := themes.List(m.themeDir())
	for _, i := range infos {
		src.themes = append(src.themes, i.Name)
	}
	app := m.app
	src.tools = func() []string {
		ids, _ := commands.ToolIDs(app)
		return ids
	}
	return src
}

// reloadRegistryQuiet picks up devices added elsewhere; an unreadable
// file keeps the last good snapshot (the error shows on the next command
// that needs it).
func (m *Model) reloadRegistryQuiet() {
	if m.opts.Store == nil {
		return
	}
	if reg, err := m.opts.Store.Load(); err == nil {
		m.setRegistry(reg)
	}
}

// setTarget makes spec the current target after checking it resolves.
func (m *Model) setTarget(spec string) error {
	targets, err := m.resolve(spec)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return fmt.Errorf("%s names no targets; add devices to it first (/device group add)", spec)
	}
	m.target, m.targetCount = spec, len(targets)
	m.agentTargetChanged()
	return nil
}

// moveTarget steps the current target through the sidebar's entries.
func (m *Model) moveTarget(d int) {
	entries := m.sidebarEntries()
	if len(entries) == 0 {
		return
	}
	i := -1
	for j, e := range entries {
		if e.name == m.target {
			i = j
		}
	}
	for step := 0; step < len(entries); step++ {
		i = (i + d + len(entries)) % len(entries)
		if err := m.setTarget(entries[i].name); err == nil {
			return
		}
	}
}

// sidebarEntry is one row of the sidebar's target list.
type sidebarEntry struct {
	name    string
	kind    string // local, device, group, host
	addr    string
	members int
}

// sidebarEntries lists local, the devices, the groups and the ad-hoc
// hosts that have been reached, in that order.
func (m *Model) sidebarEntries() []sidebarEntry {
	hosts := m.states.Names()
	out := m.known
	if len(hosts) > 0 {
		known := make(map[string]bool, len(m.known))
		for _, e := range m.known {
			known[e.name] = true
		}
		sort.Strings(hosts)
		out = slices.Clip(m.known)
		for _, h := range hosts {
			if !known[h] {
				out = append(out, sidebarEntry{name: h, kind: "host", addr: h})
			}
		}
	}
	return out
}
