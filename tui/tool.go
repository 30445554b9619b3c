package tui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/fanout"
	"github.com/rexconsole/rex/tui/engine"
)

// toolUsage is `rex tool`'s synopsis as the console spells it.
func toolUsage() string {
	return consoleWords(commands.ToolUsage) + "\n(--target defaults to the current target)"
}

// consoleWords rewrites `rex tool` in a verb's words as the slash command.
func consoleWords(s string) string {
	return strings.ReplaceAll(s, "rex tool", "/tool")
}

// cmdTool is /tool list | show ID [--trace] | run ID [--param K=V]...
// [--target TARGETS] [--trace].
func (m *Model) cmdTool(args []string) tea.Cmd {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" {
		m.msg = message{kind: msgOutput, lines: strings.Split(toolUsage(), "\n")}
		return nil
	}
	switch args[0] {
	case "list", "show", "new", "check":
		line := "/tool " + strings.Join(args, " ")
		app := m.app
		return m.startVerb(line, false, func(ctx context.Context, o commands.IO) error {
			var out strings.Builder
			err := commands.Tool(ctx, app, commands.IO{In: o.In, Out: &out, Err: &out}, args)
			fmt.Fprint(o.Out, consoleWords(out.String()))
			if err != nil && !isBareExit(err) {
				return errors.New(consoleWords(err.Error()))
			}
			return err
		})
	case "run":
		return m.toolRun(args[1:])
	}
	hint := ""
	if s := closest(args[0], []string{"list", "show", "run", "new", "check"}); s != "" {
		hint = " (did you mean " + s + "?)"
	}
	m.fail(fmt.Errorf("/tool has no verb %q%s; it takes list, show ID, run ID, new ID or check ID", args[0], hint))
	return nil
}

// isBareExit reports an exit status that carries no message of its own.
func isBareExit(err error) bool {
	var ee *commands.ExitError
	return errors.As(err, &ee) && ee.Err == nil
}

// toolRun is /tool run: a pane per target with the tool's output and
// exit status, as /run shows a command's.
func (m *Model) toolRun(args []string) tea.Cmd {
	spec, err := commands.ParseToolRun(args)
	if err != nil {
		msg := consoleWords(errorText(err))
		first, _, _ := strings.Cut(msg, "\n")
		m.fail(fmt.Errorf("/tool run: %s; usage: /tool run ID [--param K=V]... [--target TARGETS] [--trace]", first))
		return nil
	}
	if spec.Targets == "" {
		spec.Targets = m.target
	}
	if ids, err := commands.ToolIDs(m.app); err == nil && !slices.Contains(ids, spec.ID) {
		hint := ""
		if s := closest(spec.ID, ids); s != "" {
			hint = " (did you mean " + s + "?)"
		}
		m.fail(fmt.Errorf("/tool run: there is no tool %s%s; /tool list shows them", spec.ID, hint))
		return nil
	}
	targets, err := m.resolve(spec.Targets)
	if err != nil {
		m.fail(fmt.Errorf("/tool run --target %s: %w", spec.Targets, err))
		return nil
	}
	if spec.Sudo {
		targets = commands.WithSudo(targets)
	}
	for _, t := range targets {
		if _, local := t.Spec.(commands.LocalSpec); !local {
			if err := m.needPool("/tool run on " + t.Name); err != nil {
				m.fail(err)
				return nil
			}
		}
	}
	display := "tool " + spec.ID
	app, now := m.app, m.now
	// A state graph shows a pane per node and node target (node@target);
	// a JSON run on several targets shows a table of the results.
	shown, err := commands.GraphTargets(app, spec, targets)
	if err != nil {
		m.fail(fmt.Errorf("/tool run %s: %w", spec.ID, err))
		return nil
	}
	var table *commands.ToolCollector
	if spec.JSON && len(shown) > 1 {
		table = commands.NewToolCollector(shown, nil)
	}
	var t *engine.Task
	job := func(ctx context.Context, onEvent func(fanout.Event)) *fanout.Summary {
		log := newResultLog(onEvent)
		_, err := commands.RunTool(ctx, app, spec, targets, commands.ToolRunOptions{
			OnEvent: func(ev fanout.Event) {
				if table != nil {
					table.Event(ev)
				}
				log.event(ev)
			},
			OnTrace: func(target, text string) {
				if r := t.Run(target); r != nil {
					r.Buf.Note(engine.Note, "trace:\n"+strings.TrimRight(text, "\n"))
				}
			},
		})
		if err != nil {
			for _, tg := range shown {
				ev := fanout.Event{Target: tg.Name, Kind: fanout.EventResult,
					Result: &fanout.Result{Target: tg.Name, Err: err, Duration: now().Sub(t.Started)}}
				if table != nil {
					table.Event(ev)
				}
				log.event(ev)
			}
		}
		return log.summary(shown, now().Sub(t.Started))
	}
	t = m.newTask(spec.Targets, display, shown, false)
	if table != nil {
		m.gather = &gatherView{task: t, table: table}
		m.gather.refresh(m.now(), &m.keys, m)
	}
	m.runJob(t, job)
	return m.ensureTick()
}
