package tui

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/themes"
	"github.com/rexconsole/rex/tui/engine"
)

// slashCmd is one slash command: its name, its arguments and what it
// does, for /help and completion, and its implementation.
type slashCmd struct {
	name    string
	args    string
	summary string
	run     func(m *Model, args []string) tea.Cmd
}

// slashCommands is the table of slash commands, in /help order.
func slashCommands() []slashCmd {
	return []slashCmd{
		{"device", "VERB ...", "manage devices and groups, as rex device does (/device help)", (*Model).cmdDevice},
		{"target", "NAME|GROUP|local", "set the target of plain command lines; any TARGETS list works", (*Model).cmdTarget},
		{"run", "TARGETS -- CMD", "run CMD on TARGETS, a pane per target (rex run's flags: --gather, -t D, -x NAMES, --batch N, --canary N, --max-fail N|P%)", (*Model).cmdRun},
		{"push", "SRC... DEST [TARGETS]", "add and update files there (--delete, --atomic, --dry-run, --sudo, -w, -x)", (*Model).cmdPush},
		{"pull", "REMOTE LOCAL [TARGETS]", "bring a directory back, merged here (--dry-run, --sudo, -w, -x)", (*Model).cmdPull},
		{"tool", "list|show ID|run ID", "list, show or run tools (--param K=V, --target T, --trace)", (*Model).cmdTool},
		{"attach", "[TARGETS] [-- CMD]", "a terminal per target: the login shell or CMD (ctrl+] leaves)", (*Model).cmdAttach},
		{"broadcast", "", "keys to all terminals of the focused /attach on/off (ctrl+x)", (*Model).cmdBroadcast},
		{"fullscreen", "", "focused terminal on the whole screen, ctrl+] back (ctrl+t)", (*Model).cmdFullscreen},
		{"reconnect", "[all]", "a new terminal in the focused pane, or in every ended one", (*Model).cmdReconnect},
		{"focus", "N|NAME", "focus pane N or NAME's pane; a terminal pane takes the keys", (*Model).cmdFocus},
		{"kill", "", "cancel the focused pane's task (ctrl+c), or end its terminal", (*Model).cmdKill},
		{"close", "[all]", "close the focused pane, or every finished pane", (*Model).cmdClose},
		{"clear", "[all]", "clear the focused pane's scrollback, or every pane's (ctrl+l)", (*Model).cmdClear},
		{"layout", "grid|rows|columns", "arrange the panes", (*Model).cmdLayout},
		{"theme", "[NAME]", "list the themes, or switch to one (kept in config.toml)", (*Model).cmdTheme},
		{"gather", "", "toggle the gathered view of a task on several targets (ctrl+g)", (*Model).cmdGather},
		{"zoom", "", "show the focused pane alone, or all panes again (ctrl+o)", (*Model).cmdZoom},
		{"find", "TEXT", "search the focused pane; lower case ignores case (ctrl+f)", (*Model).cmdFind},
		{"agent", "on|off|new|resume|each", "the agent: ? asks once; on sends every line; each G -- TASK", (*Model).cmdAgent},
		{"help", "", "show the commands and keys (f1)", (*Model).cmdHelp},
		{"tasks", "[N]", "every command run this session with its status; N opens one again (f3)", (*Model).cmdTasks},
		{"detach", "", "leave the console running in the rex server; rex attaches again", (*Model).cmdDetach},
		{"quit", "", "leave the console; asks first while tasks run or terminals are open (ctrl+q)", (*Model).cmdQuit},
	}
}

// slash runs a slash command line.
func (m *Model) slash(line string) tea.Cmd {
	name, rest, _ := strings.Cut(strings.TrimPrefix(line, "/"), " ")
	args, err := splitWords(rest)
	if err != nil {
		m.fail(fmt.Errorf("/%s: %w", name, err))
		return nil
	}
	for _, c := range slashCommands() {
		if c.name == name {
			return c.run(m, args)
		}
	}
	names := make([]string, 0, 16)
	for _, c := range slashCommands() {
		names = append(names, c.name)
	}
	hint := ""
	if s := closest(name, names); s != "" {
		hint = " (did you mean /" + s + "?)"
	}
	m.fail(fmt.Errorf("unknown command /%s%s; /help lists the commands", name, hint))
	return nil
}

// closest is the name nearest to word by edit distance, if near enough.
func closest(word string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := devices.EditDistance(word, n); d < bestD || (d == bestD && best == "" && strings.HasPrefix(n, word)) {
			best, bestD = n, d
		}
	}
	if best == "" {
		for _, n := range names {
			if word != "" && strings.HasPrefix(n, word) {
				return n
			}
		}
	}
	return best
}

// cmdDevice runs `rex device ARGS` in the background; its output shows in
// the message area, or in a pane when it is long.
func (m *Model) cmdDevice(args []string) tea.Cmd {
	verb := m.opts.DeviceVerb
	if verb == nil {
		store := m.opts.Store
		if store == nil {
			m.fail(errors.New("/device needs the device registry, which this console was started without"))
			return nil
		}
		verb = func(ctx context.Context, o commands.IO, args []string) error {
			return commands.Device(ctx, store, o, args)
		}
	}
	line := strings.TrimSpace("/device " + strings.Join(args, " "))
	return m.startVerb(line, true, func(ctx context.Context, o commands.IO) error { return verb(ctx, o, args) })
}

// startVerb runs a verb in the background; its output shows in the
// message area, or in a pane when it is long. One runs at a time. reload
// reads devices.json again when it ends.
func (m *Model) startVerb(line string, reload bool, verb func(ctx context.Context, o commands.IO) error) tea.Cmd {
	if m.verb != nil {
		m.fail(fmt.Errorf("%s is still running; wait for it or press ctrl+c to stop it", m.verb.line))
		return nil
	}
	ctx, cancel := context.WithCancel(m.ctx)
	m.verb = &verbRun{line: line, started: m.now(), cancel: cancel}
	m.msg = message{}
	run := func() tea.Msg {
		defer cancel()
		var out bytes.Buffer
		o := commands.IO{In: strings.NewReader(""), Out: &out, Err: &out}
		err := verb(ctx, o)
		return verbDoneMsg{out: out.String(), err: err, reload: reload}
	}
	return tea.Batch(run, m.ensureTick())
}

// verbDone shows a verb's output.
func (m *Model) verbDone(d verbDoneMsg) tea.Cmd {
	line := ""
	if m.verb != nil {
		line = m.verb.line
	}
	m.verb = nil
	if d.reload {
		m.reloadRegistry()
	}
	text := strings.TrimRight(ansi.Strip(d.out), "\n")
	var lines []string
	if text != "" {
		for _, l := range strings.Split(text, "\n") {
			lines = append(lines, engine.Sanitize([]byte(l)))
		}
	}
	if d.err != nil {
		msg := errorText(d.err)
		if len(lines) == 0 || lines[len(lines)-1] != msg {
			lines = append(lines, msg)
		}
	}
	if len(lines) > m.messageRoom() {
		m.openText(line, lines)
		m.info("%s: %d lines, shown in a pane (/close closes it)", line, len(lines))
		return nil
	}
	kind := msgOutput
	if d.err != nil {
		kind = msgError
	}
	m.msg = message{kind: kind, lines: lines}
	return nil
}

// messageRoom is how many lines the message area may take.
func (m *Model) messageRoom() int {
	return max(3, m.height/3)
}

// openText shows lines in a new text pane and focuses it.
func (m *Model) openText(title string, lines []string) {
	buf := engine.NewBuffer(max(m.cfg.Scrollback, len(lines)), m.seed, m.signal.mark)
	buf.Note(engine.Out, strings.Join(lines, "\n"))
	p := newTextPane(title, buf, &m.keys)
	p.follow = false
	m.panes = append(m.panes, p)
	m.setFocus(len(m.panes)-1, false)
	m.zoom, m.gather = false, nil
}

func (m *Model) cmdTarget(args []string) tea.Cmd {
	if len(args) == 0 {
		m.info("the target is %s (%s); /target NAME|GROUP|local changes it", m.target, plural(m.targetCount, "machine", "machines"))
		return nil
	}
	spec := strings.Join(args, ",")
	if err := m.setTarget(spec); err != nil {
		m.fail(fmt.Errorf("/target %s: %w", spec, err))
		return nil
	}
	targets, _ := m.resolve(spec)
	names := make([]string, 0, len(targets))
	for _, t := range targets {
		names = append(names, t.Name)
	}
	if len(names) == 1 && names[0] == spec {
		m.info("target %s: command lines now run there", spec)
	} else {
		m.info("target %s: command lines now run on %s (%s)", spec, plural(len(names), "machine", "machines"), cut(devices.Fold(names), 120))
	}
	return nil
}

func (m *Model) cmdRun(args []string) tea.Cmd {
	spec, err := commands.ParseRun(args)
	if err != nil {
		m.fail(fmt.Errorf("/run: %s", strings.Replace(errorText(err), "rex run", "/run", 1)))
		return nil
	}
	if spec.JSON {
		m.fail(errors.New("/run: --json is for scripts; the console shows each target in its own pane"))
		return nil
	}
	if spec.OutDir != "" {
		m.fail(errors.New("/run: --outdir is for the command line; the console keeps each target's output in its pane"))
		return nil
	}
	targets, err := m.resolve(spec.Targets)
	if err != nil {
		m.fail(fmt.Errorf("/run %s: %w", spec.Targets, err))
		return nil
	}
	if spec.Sudo {
		targets = commands.WithSudo(targets)
	}
	display := spec.Task.Command
	if display == "" {
		display = strings.Join(spec.Task.Argv, " ")
	}
	opts := spec.RollingFlags.Options(len(targets))
	opts.Concurrency, opts.ConnectTimeout = m.cfg.Concurrency, spec.ConnectTimeout
	if spec.Concurrency > 0 {
		opts.Concurrency = spec.Concurrency
	}
	t, cmd := m.startTask(spec.Targets, display, targets, m.fanJobWith(targets, spec.Task, opts))
	if spec.Gather && t != nil && m.gather == nil {
		// This one gathered; what follows as the operator chose (ctrl+g).
		m.showGather(t)
	}
	return cmd
}

func (m *Model) cmdKill(args []string) tea.Cmd {
	if len(args) > 0 {
		m.fail(errors.New("/kill takes no arguments; it stops the focused pane's task (focus another with tab)"))
		return nil
	}
	if p := m.focusedTerm(); p != nil {
		if !p.kill() {
			m.fail(fmt.Errorf("the terminal on %s is not running; /close closes its pane", p.Title()))
			return nil
		}
		m.info("ending %s on %s", p.task.command, p.Title())
		return m.ensureTick()
	}
	t := m.focusedTask()
	if t == nil || !t.Stop() {
		m.fail(errors.New("nothing is running in the focused pane; focus a running one with tab"))
		return nil
	}
	m.lastCancel = m.now()
	m.info("cancelling %s on %s", cut(t.Command, 40), plural(len(t.Runs), "target", "targets"))
	m.msg.transient = true
	return m.ensureTick()
}

func (m *Model) cmdClose(args []string) tea.Cmd {
	all, err := allArg("close", args)
	if err != nil {
		m.fail(err)
		return nil
	}
	if len(m.panes) == 0 {
		m.fail(errors.New("there is no pane to close"))
		return nil
	}
	if !all {
		if p, ok := m.panes[m.focus].(*outputPane); ok && p.running() {
			m.fail(fmt.Errorf("the pane %s is still running; stop it with ctrl+c or /kill, then /close it", p.Title()))
			return nil
		}
		if p, ok := m.panes[m.focus].(*ptyPane); ok && p.phase() == termLive {
			m.fail(fmt.Errorf("the terminal on %s is still open; exit its program or /kill it, then /close it", p.Title()))
			return nil
		}
		title := m.panes[m.focus].Title()
		m.closePane(m.focus)
		m.info("closed %s", title)
		return nil
	}
	closed, left, open := 0, 0, 0
	for i := len(m.panes) - 1; i >= 0; i-- {
		if p, ok := m.panes[i].(*outputPane); ok && p.running() {
			left++
			continue
		}
		if p, ok := m.panes[i].(*ptyPane); ok && p.phase() == termLive {
			open++
			continue
		}
		m.closePane(i)
		closed++
	}
	var still []string
	if left > 0 {
		still = append(still, plural(left, "pane is", "panes are")+" still running (ctrl+c stops the focused one)")
	}
	if open > 0 {
		still = append(still, plural(open, "terminal is", "terminals are")+" still open (exit their programs, or /kill the focused one)")
	}
	if len(still) > 0 {
		m.info("closed %s; %s", plural(closed, "pane", "panes"), strings.Join(still, "; "))
	} else {
		m.info("closed %s", plural(closed, "pane", "panes"))
	}
	return nil
}

// allArg accepts no argument or "all".
func allArg(cmd string, args []string) (bool, error) {
	switch {
	case len(args) == 0:
		return false, nil
	case len(args) == 1 && args[0] == "all":
		return true, nil
	}
	return false, fmt.Errorf("/%s takes nothing or \"all\", not %q", cmd, strings.Join(args, " "))
}

func (m *Model) cmdClear(args []string) tea.Cmd {
	all, err := allArg("clear", args)
	if err != nil {
		m.fail(err)
		return nil
	}
	m.msg = message{}
	m.clearPanes(all)
	return nil
}

func (m *Model) cmdLayout(args []string) tea.Cmd {
	if len(args) != 1 || !validLayout(args[0]) {
		hint := ""
		if len(args) == 1 {
			if s := closest(args[0], []string{layoutGrid, layoutRows, layoutColumns}); s != "" {
				hint = " (did you mean " + s + "?)"
			}
		}
		m.fail(fmt.Errorf("/layout takes grid, rows or columns%s; the layout is %s", hint, m.layout))
		return nil
	}
	m.layout = args[0]
	m.info("layout %s", m.layout)
	return nil
}

func (m *Model) cmdTheme(args []string) tea.Cmd {
	if len(args) == 0 {
		infos, err := themes.List(m.themeDir())
		lines := []string{"themes (/theme NAME switches):"}
		for _, i := range infos {
			mark := "  "
			if i.Name == m.st.Theme.Name {
				mark = "* "
			}
			lines = append(lines, mark+i.Name+"  "+i.Description)
		}
		if err != nil {
			lines = append(lines, err.Error())
		}
		m.msg = message{kind: msgOutput, lines: lines}
		return nil
	}
	if len(args) > 1 {
		m.fail(errors.New("/theme takes one theme name; /theme alone lists them"))
		return nil
	}
	th, err := themes.Load(args[0], m.themeDir())
	if err != nil {
		m.fail(err)
		return nil
	}
	m.setTheme(th)
	m.cfg.Theme = th.Name
	if m.opts.ConfigDir != "" {
		if err := saveTheme(m.opts.ConfigDir, th.Name); err != nil {
			m.fail(fmt.Errorf("theme %s is on for now, but %w", th.Name, err))
			return nil
		}
	}
	m.info("theme %s", th.Name)
	return nil
}

func (m *Model) cmdGather(args []string) tea.Cmd {
	if err := m.toggleGather(); err != nil {
		m.fail(err)
	}
	return nil
}

func (m *Model) cmdZoom(args []string) tea.Cmd {
	if !m.toggleZoom() {
		m.fail(errors.New("there is no pane to zoom; run a command first"))
	}
	return nil
}

func (m *Model) cmdFind(args []string) tea.Cmd {
	p, ok := m.activePane().(*outputPane)
	if !ok {
		m.fail(errNoSearch(m.activePane()))
		return nil
	}
	q := strings.Join(args, " ")
	p.Search(q)
	if q == "" {
		m.info("search cleared")
		return nil
	}
	m.info("%s: %s (ctrl+f, then ↑/↓, steps through matches)", q, p.SearchStatus())
	return nil
}

func (m *Model) cmdHelp(args []string) tea.Cmd {
	m.helpOpen, m.helpTop = true, 0
	return nil
}

func (m *Model) cmdQuit(args []string) tea.Cmd {
	return m.requestQuit()
}

func (m *Model) cmdDetach(args []string) tea.Cmd {
	if m.host == nil {
		m.fail(errors.New("this console runs without a rex server (rex --no-server): there is nothing to detach from; /quit leaves"))
		return nil
	}
	m.host.Detach("detached from the console")
	return nil
}
