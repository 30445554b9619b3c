package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/toolset"
)

// ClientName is the name the agent's rexd sessions carry, so rexd's audit
// log tells the agent's actions from the operator's.
const ClientName = "rex-agent"

// AskSpec is `rex ask [--target TARGETS] [--yes | --allow TOOL...] [--json]
// -- PROMPT`.
type AskSpec struct {
	Targets commands.TargetFlags
	Yes     bool
	Allow   []string
	JSON    bool
	Model   Overrides
	Prompt  string
}

// AskUsage is the synopsis of rex ask.
const AskUsage = "rex ask [--target TARGETS] [--yes | --allow TOOL...] [--json] -- PROMPT"

// Bind declares rex ask's flags.
func (s *AskSpec) Bind(fs *pflag.FlagSet) {
	s.Targets.Bind(fs)
	fs.BoolVarP(&s.Yes, "yes", "y", false, "run every tool call without asking (deny patterns of the config still refuse)")
	fs.StringSliceVar(&s.Allow, "allow", nil, "run calls of these tools without asking (bash, write, edit, a chain tool; repeatable)")
	commands.BindJSON(fs, &s.JSON)
	BindModelFlags(fs, &s.Model)
}

// BindModelFlags declares --provider, --model and --base-url, which
// override config.toml's [agent] table.
func BindModelFlags(fs *pflag.FlagSet, o *Overrides) {
	fs.StringVar(&o.Provider, "provider", "", "the provider: openai-compatible, openai, anthropic, openrouter or gemini")
	fs.StringVar(&o.Model, "model", "", "the model to ask")
	fs.StringVar(&o.BaseURL, "base-url", "", "the provider's address (an OpenAI-compatible server, e.g. http://localhost:11434/v1)")
}

// Args takes the prompt from the words after the flags.
func (s *AskSpec) Args(args []string) error {
	s.Prompt = strings.TrimSpace(strings.Join(args, " "))
	if s.Prompt == "" {
		return commands.Usagef("what should the agent do? usage: %s", AskUsage)
	}
	if s.Yes && len(s.Allow) > 0 {
		return commands.Usagef("--yes already allows every tool; give --yes or --allow, not both")
	}
	return nil
}

// AskEnv is what rex ask needs of the command line's setup.
type AskEnv struct {
	App    *commands.App
	Paths  commands.Paths
	IO     commands.IO
	Getenv func(string) string
	// HTTPClient reaches the provider; nil is the default client.
	HTTPClient *http.Client
}

// Ask is `rex ask`: one turn of the agent to its end, its transcript on
// stdout (or one JSON event per line), its refusals and errors on stderr.
// Exit status: 0 when the agent finished, 1 when it failed or a call was
// refused, 130 when interrupted.
func Ask(ctx context.Context, env AskEnv, spec AskSpec) error {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	cfg, err := LoadConfig(env.Paths.Config)
	if err != nil {
		return err
	}
	cfg = cfg.With(spec.Model)
	if err := cfg.Ready(env.Getenv); err != nil {
		return err
	}
	ts := toolset.New(toolset.Options{App: env.App, ClientName: ClientName, ChainTools: true})
	defer ts.Close()
	for _, name := range spec.Allow {
		if _, ok := ts.Lookup(name); !ok {
			return commands.Usagef("--allow %s: there is no tool %q; the tools are %s", name, name, strings.Join(toolset.BuiltinNames(), ", "))
		}
	}
	model, err := NewModel(ctx, cfg, env.Getenv, env.HTTPClient)
	if err != nil {
		return err
	}
	target := spec.Targets.Spec(spec.Targets.Target)
	if target == "" {
		target = commands.LocalName
	}
	if _, err := env.App.Resolve(target); err != nil {
		return err
	}
	consent := &Consent{Yolo: spec.Yes, AllowTools: spec.Allow, Allow: cfg.Allow, Deny: cfg.Deny}
	sess := New(Options{
		Model: model, Config: cfg, Toolset: ts, Consent: consent,
		Target: func() string { return target },
		Store:  &Store{Dir: filepath.Join(env.Paths.State, "agent")},
		Getenv: env.Getenv,
	})
	var p printer
	if spec.JSON {
		p = newJSONPrinter(env.IO.Out)
	} else {
		p = &textPrinter{out: env.IO.Out, err: env.IO.Err, yes: spec.Yes}
	}
	r := sess.Turn(ctx, spec.Prompt, p.event)
	p.end(r)
	switch r.Outcome {
	case OutcomeFinished:
		return nil
	case OutcomeCancelled:
		return &commands.ExitError{Code: 130}
	}
	return &commands.ExitError{Code: 1}
}

type printer interface {
	event(Event)
	end(*TurnResult)
}

// jsonPrinter writes every event as one JSON line.
type jsonPrinter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newJSONPrinter(w io.Writer) *jsonPrinter {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &jsonPrinter{enc: enc}
}

func (j *jsonPrinter) event(e Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.enc.Encode(e)
}

func (j *jsonPrinter) end(*TurnResult) {}

// textPrinter writes the transcript: the answer as it streams, each tool
// call with where it ran and its summary line; refusals and the reason a
// turn stopped go to stderr.
type textPrinter struct {
	out, err io.Writer
	yes      bool
	// midLine is set while the answer's last line has no newline yet.
	midLine bool
}

func (p *textPrinter) newline() {
	if p.midLine {
		fmt.Fprintln(p.out)
		p.midLine = false
	}
}

func (p *textPrinter) event(e Event) {
	switch e.Type {
	case EventText:
		fmt.Fprint(p.out, printable(e.Text))
		p.midLine = !strings.HasSuffix(e.Text, "\n")
	case EventToolStart:
		p.newline()
		fmt.Fprintf(p.out, "\n→ %s %s on %s\n", e.Tool, quoteCommand(e.Command), where(e.Target, e.Hosts))
	case EventToolResult:
		if e.Summary == "refused" {
			return
		}
		mark := "  ✓"
		if e.IsError {
			mark = "  ✗"
		}
		summary := e.Summary
		if i := strings.IndexByte(summary, '\n'); i >= 0 {
			summary = summary[:i]
		}
		fmt.Fprintf(p.out, "%s %s\n", mark, printable(summary))
		if e.JobID != "" {
			fmt.Fprintf(p.out, "  (still running as job %s)\n", e.JobID)
		}
		fmt.Fprintln(p.out)
	case EventConsent:
		if e.Decision == ConsentRefused {
			p.newline()
			hint := "rex ask asks no questions: pass --yes, or --allow " + e.Tool
			if p.yes {
				hint = "it matches a deny pattern of [agent] deny"
			}
			fmt.Fprintf(p.err, "rex: refused %s %s on %s (%s)\n", e.Tool, quoteCommand(e.Command), where(e.Target, e.Hosts), hint)
		}
	case EventRetry:
		fmt.Fprintf(p.err, "rex: %s; trying again in %dms\n", printable(e.Error), e.DelayMS)
	}
}

func (p *textPrinter) end(r *TurnResult) {
	p.newline()
	if r.Err != nil {
		fmt.Fprintf(p.err, "rex: %s\n", printable(r.Err.Error()))
	}
}

func quoteCommand(c string) string {
	if strings.ContainsAny(c, "\n") {
		c = strings.SplitN(c, "\n", 2)[0] + " …"
	}
	return "`" + printable(c) + "`"
}

// printable makes text from the model or the hosts safe to write to the
// operator's terminal, as the console's transcript does: control
// characters (an ESC starts an escape sequence) and invalid UTF-8 become
// U+FFFD; newlines and tabs stay.
func printable(s string) string {
	return strings.ToValidUTF8(strings.Map(func(c rune) rune {
		switch {
		case c == '\n' || c == '\t':
			return c
		case c < 0x20, c >= 0x7f && c < 0xa0:
			return '\uFFFD'
		}
		return c
	}, s), "\uFFFD")
}

// where is "fleet (h[1-3])", or the host alone when the target is it.
func where(target string, hosts []string) string {
	if len(hosts) == 0 || len(hosts) == 1 && hosts[0] == target {
		return target
	}
	return target + " (" + devices.Fold(hosts) + ")"
}
