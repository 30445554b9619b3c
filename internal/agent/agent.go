// Package agent is rex's agent loop: a model (charm.land/fantasy, any of
// its providers) that sees the one logical toolset of internal/toolset,
// routed to the operator's target, with every call that can change
// something put to the operator first (Consent). It keeps the guard rails
// around the loop (a step cap, loop detection, retries only for 429 and
// 5xx, summarising older turns when the context window fills) and keeps
// conversations as JSON lines under the state directory.
//
// The console's `?` lines, `rex ask` and `/agent each` all run turns of a
// Session; they differ only in how they show Events and how they ask.
package agent

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/openrouter"

	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/secrets"
	"github.com/rexconsole/rex/internal/toolset"
)

//go:embed prompt.md
var systemPrompt string

// Loop detection: the same call (tool and arguments) made loopRepeats
// times within loopWindow steps ends the turn.
const (
	loopRepeats = 5
	loopWindow  = 10
)

// Options make a Session.
type Options struct {
	Model   fantasy.LanguageModel
	Config  Config // with defaults applied (Config.With)
	Toolset *toolset.Toolset
	Consent *Consent
	// Target is where calls go now (the operator's /target); "" is local.
	// It is asked at every call, never put in the prompt.
	Target func() string
	// Store keeps the conversation; nil keeps none.
	Store *Store
	// Retries and RetryDelay shape the retries of 429 and 5xx answers;
	// zero values are 4 retries starting at 2 s.
	Retries    int
	RetryDelay time.Duration
	// Prompt is added to the system prompt (an /agent each loop says
	// which host it works on).
	Prompt string
	// Each marks a loop of /agent each: AllowAll answers apply.
	Each bool
	// Host names the loop's host in its events (/agent each).
	Host string
	// OnTool, when set, receives every tool call's progress as the
	// toolset reports it (the hosts at the start, output, each host's end
	// with its result, the end of the call or of its background job), for
	// front ends that show it in panes. It is called from the call's
	// goroutines, and for a call that moved to the background after its
	// turn ended.
	OnTool func(c ToolCall, ev toolset.Event)
	// Getenv reads the API key's variable, as the model was made with it,
	// so that the key is masked in tool results; nil is os.Getenv.
	Getenv func(string) string
}

// ToolCall says which call an OnTool event belongs to.
type ToolCall struct {
	ID      string
	Tool    string
	Command string
	Target  string
	Hosts   []string
	// Loop is the /agent each loop's host, "" otherwise.
	Loop string
}

// minMaskedKey is the shortest API key masked in tool results.
const minMaskedKey = 12

// Session is a conversation with the model. Turns run one at a time.
type Session struct {
	opts Options
	// mask are rex's own secrets (the API key): a command on local can
	// print them from the environment it inherits, and they must not go
	// back to the model or into the kept conversation.
	mask []string

	turnMu sync.Mutex // held for a whole turn

	mu      sync.Mutex
	id      string
	started bool
	history []fantasy.Message
	usage   Usage
}

// New returns a session with a fresh conversation.
func New(opts Options) *Session {
	if opts.Target == nil {
		opts.Target = func() string { return commands.LocalName }
	}
	if opts.Consent == nil {
		opts.Consent = &Consent{}
	}
	if opts.Retries == 0 {
		opts.Retries = defaultRetries
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = defaultRetryDelay
	}
	if opts.Config.MaxSteps <= 0 {
		opts.Config.MaxSteps = DefaultMaxSteps
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	s := &Session{opts: opts, id: newID(time.Now())}
	if k := opts.Config.APIKeyEnv; k != "" {
		// A stand-in key for a local server ("x", "ollama") is no secret,
		// and masking it would garble every result.
		if v := opts.Getenv(k); len(v) >= minMaskedKey {
			s.mask = []string{v}
		}
	}
	return s
}

// ID is the conversation's id.
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Usage is the tokens (and cost) of the conversation so far.
func (s *Session) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage
}

// Model names the model, for the status bar.
func (s *Session) Model() string { return s.opts.Config.Model }

// Reset starts a new conversation; grants for the session are forgotten.
func (s *Session) Reset() {
	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	s.mu.Lock()
	s.id, s.started, s.history, s.usage = newID(time.Now()), false, nil, Usage{}
	s.mu.Unlock()
	s.opts.Consent.Reset()
}

// Resume continues a stored conversation.
func (s *Session) Resume(id string) error {
	if s.opts.Store == nil {
		return errors.New("conversations are not kept here")
	}
	msgs, u, err := s.opts.Store.Load(id)
	if err != nil {
		return err
	}
	s.turnMu.Lock()
	defer s.turnMu.Unlock()
	s.mu.Lock()
	s.id, s.started, s.history, s.usage = id, true, msgs, u
	s.mu.Unlock()
	s.opts.Consent.Reset()
	return nil
}

// TurnResult is how a turn ended.
type TurnResult struct {
	Outcome string
	// Text is the answer's last text.
	Text  string
	Steps int
	// Err says in one sentence why the turn did not finish.
	Err error
}

// turn is the state of one running turn.
type turn struct {
	s    *Session
	emit func(Event)

	mu       sync.Mutex
	step     int
	calls    []callSig
	outcome  string
	stopMsg  string
	targets  map[string]bool
	messages []fantasy.Message
	text     strings.Builder
	// covers is how many messages after the system prompt a summary
	// replaces; summary is its text.
	covers  int
	summary string
}

type callSig struct {
	step int
	sig  string
}

func (t *turn) send(e Event) {
	e.Time = time.Now()
	if e.Host == "" {
		e.Host = t.s.opts.Host
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.emit(e)
}

// Turn sends prompt to the model and runs its tool calls until it answers,
// the operator refuses a call, a guard rail stops it, or ctx ends (which
// stops the request and every command it started). emit receives the
// turn's events, one at a time.
func (s *Session) Turn(ctx context.Context, prompt string, emit func(Event)) *TurnResult {
	if emit == nil {
		emit = func(Event) {}
	}
	s.turnMu.Lock()
	defer s.turnMu.Unlock()

	t := &turn{s: s, emit: emit, targets: map[string]bool{}}
	target := s.target()
	t.send(Event{Type: EventTurnStart, Prompt: prompt, Target: target})

	s.mu.Lock()
	history := append([]fantasy.Message(nil), s.history...)
	id, started := s.id, s.started
	s.started = true
	s.mu.Unlock()
	if !started {
		s.opts.Store.append(id, record{Type: "meta", Time: time.Now(), ID: id, Provider: s.opts.Config.Provider, Model: s.opts.Config.Model})
	}

	tools, toolErr := s.opts.Toolset.Tools()
	agentTools := make([]fantasy.AgentTool, 0, len(tools))
	for _, tl := range tools {
		agentTools = append(agentTools, &agentTool{tool: tl, turn: t})
	}
	model := &retryModel{LanguageModel: s.opts.Model, retries: s.opts.Retries, delay: s.opts.RetryDelay,
		onRetry: func(err error, d time.Duration) {
			t.send(Event{Type: EventRetry, Error: providerSentence(err, s.opts.Config.BaseURL), DelayMS: d.Milliseconds()})
		}}
	sys := systemPrompt
	if s.opts.Prompt != "" {
		sys += "\n" + s.opts.Prompt
	}
	if toolErr != nil {
		sys += "\nNote: " + toolErr.Error()
	}
	a := fantasy.NewAgent(model,
		fantasy.WithSystemPrompt(sys),
		fantasy.WithTools(agentTools...),
		fantasy.WithMaxRetries(0),
		fantasy.WithStopConditions(fantasy.StepCountIs(s.opts.Config.MaxSteps)),
	)
	user := fantasy.NewUserMessage(prompt)
	t.messages = []fantasy.Message{user}
	var stepTexts []string
	res, err := a.Stream(ctx, fantasy.AgentStreamCall{
		Prompt:   prompt,
		Messages: history,
		PrepareStep: func(ctx context.Context, o fantasy.PrepareStepFunctionOptions) (context.Context, fantasy.PrepareStepResult, error) {
			msgs, err := t.fit(ctx, model, o.Messages)
			return ctx, fantasy.PrepareStepResult{Messages: msgs}, err
		},
		OnStepStart: func(n int) error {
			t.mu.Lock()
			t.step = n
			t.text.Reset()
			t.mu.Unlock()
			return nil
		},
		OnTextDelta: func(_, text string) error {
			t.mu.Lock()
			t.text.WriteString(text)
			t.mu.Unlock()
			t.send(Event{Type: EventText, Text: text})
			return nil
		},
		OnStreamFinish: func(u fantasy.Usage, _ fantasy.FinishReason, md fantasy.ProviderMetadata) error {
			su := Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens, Cost: costOf(md)}
			if su.TotalTokens == 0 {
				su.TotalTokens = su.InputTokens + su.OutputTokens
			}
			s.mu.Lock()
			s.usage.add(su)
			total := s.usage
			s.mu.Unlock()
			t.send(Event{Type: EventUsage, Usage: &total})
			return nil
		},
		OnStepFinish: func(st fantasy.StepResult) error {
			t.mu.Lock()
			t.messages = append(t.messages, st.Messages...)
			stepTexts = append(stepTexts, t.text.String())
			t.mu.Unlock()
			return nil
		},
	})

	r := &TurnResult{}
	t.mu.Lock()
	r.Steps = len(stepTexts)
	for i := len(stepTexts) - 1; i >= 0; i-- {
		if strings.TrimSpace(stepTexts[i]) != "" {
			r.Text = stepTexts[i]
			break
		}
	}
	outcome, stopMsg := t.outcome, t.stopMsg
	t.mu.Unlock()
	switch {
	case ctx.Err() != nil:
		r.Outcome, r.Err = OutcomeCancelled, errors.New("cancelled; the request and every command it started were stopped")
	case err != nil:
		r.Outcome, r.Err = OutcomeFailed, errors.New(providerSentence(err, s.opts.Config.BaseURL))
	case outcome != "":
		r.Outcome, r.Err = outcome, errors.New(stopMsg)
	case res != nil && len(res.Steps) >= s.opts.Config.MaxSteps && res.Steps[len(res.Steps)-1].FinishReason == fantasy.FinishReasonToolCalls:
		r.Outcome = OutcomeStepCap
		r.Err = fmt.Errorf("stopped after %d steps, the step cap ([agent] max_steps); ask again to go on", s.opts.Config.MaxSteps)
	default:
		r.Outcome = OutcomeFinished
	}
	s.finishTurn(t, prompt, history, r)
	ev := Event{Type: EventTurnEnd, Outcome: r.Outcome, Steps: r.Steps}
	if r.Err != nil {
		ev.Error = r.Err.Error()
	}
	t.send(ev)
	return r
}

// finishTurn keeps what the turn added to the conversation.
func (s *Session) finishTurn(t *turn, prompt string, before []fantasy.Message, r *TurnResult) {
	t.mu.Lock()
	msgs := append([]fantasy.Message(nil), t.messages...)
	covers, summary := t.covers, t.summary
	var targets []string
	for k := range t.targets {
		targets = append(targets, k)
	}
	t.mu.Unlock()
	sort.Strings(targets)
	if r.Outcome == OutcomeCancelled || r.Outcome == OutcomeFailed {
		// The model never saw an answer to its last request; a note keeps
		// the next turn from picking up mid-thought.
		msgs = append(msgs, fantasy.NewUserMessage("(That turn was interrupted: "+r.Err.Error()+")"))
	}
	all := append(before, msgs...)
	s.mu.Lock()
	id := s.id
	s.history = all
	if summary != "" {
		s.history = append([]fantasy.Message{summaryMessage(summary)}, all[min(covers, len(all)):]...)
	}
	usage := s.usage
	s.mu.Unlock()
	s.opts.Store.append(id, record{Type: "turn", Time: time.Now(), Prompt: prompt, Targets: targets, Messages: msgs, Outcome: r.Outcome, Usage: &usage})
	if summary != "" {
		s.opts.Store.append(id, record{Type: "summary", Time: time.Now(), Summary: summary, Keep: len(all) - min(covers, len(all))})
	}
}

func (s *Session) target() string {
	t := s.opts.Target()
	if t == "" {
		t = commands.LocalName
	}
	return t
}

// providerSentence says what went wrong with the provider in one sentence;
// baseURL is where the provider was asked (empty: the provider's own).
func providerSentence(err error, baseURL string) string {
	var pe *fantasy.ProviderError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(pe.Cause, errIncomplete) || pe.Title == "stream transport error" && strings.Contains(pe.Message, "unexpected EOF"):
			return "the provider's answer broke off before it was finished (no finish_reason); ask again"
		case pe.StatusCode == http.StatusTooManyRequests:
			return "the provider is rate-limiting these requests (HTTP 429) and kept doing so; wait a little and ask again"
		case pe.StatusCode == http.StatusUnauthorized || pe.StatusCode == http.StatusForbidden:
			return fmt.Sprintf("the provider refused the API key (HTTP %d); check the key in the variable [agent] api_key_env names", pe.StatusCode)
		case pe.StatusCode == http.StatusNotFound:
			return fmt.Sprintf("the provider does not know this model or address (HTTP 404): %s; check [agent] model and base_url", pe.Message)
		case pe.StatusCode >= 500:
			return fmt.Sprintf("the provider failed (HTTP %d: %s) and kept failing; try again later", pe.StatusCode, pe.Message)
		case pe.StatusCode > 0:
			return fmt.Sprintf("the provider refused the request (HTTP %d): %s", pe.StatusCode, pe.Message)
		}
		return "the provider's answer broke off: " + pe.Error()
	}
	var re *fantasy.RetryError
	if errors.As(err, &re) && len(re.Errors) > 0 {
		return providerSentence(re.Errors[len(re.Errors)-1], baseURL)
	}
	msg := err.Error()
	if strings.Contains(msg, "connection refused") {
		if baseURL != "" {
			// The address itself: with no base_url set it is the
			// default (Ollama's), which the operator never wrote down.
			return fmt.Sprintf("the model server at %s did not answer (connection refused); start it, or set [agent] base_url to where it runs", baseURL)
		}
		return "the model server did not answer (connection refused): is it running at [agent] base_url?"
	}
	return "the model request failed: " + msg
}

// errIncomplete matches fantasy's error for a stream without its end.
var errIncomplete = fantasy.NewIncompleteStreamError().Cause

// costOf reads the price of a request when the provider reports one.
func costOf(md fantasy.ProviderMetadata) float64 {
	if md == nil {
		return 0
	}
	if m, ok := md[openrouter.Name].(*openrouter.ProviderMetadata); ok {
		return m.Usage.Cost
	}
	return 0
}

// agentTool offers one toolset tool to the model.
type agentTool struct {
	tool toolset.Tool
	turn *turn
	opts fantasy.ProviderOptions
}

func (a *agentTool) Info() fantasy.ToolInfo {
	return fantasy.ToolInfo{
		Name:        a.tool.Name,
		Description: a.tool.Description,
		Parameters:  a.tool.Properties(),
		Required:    a.tool.Required(),
		// Read-only calls of one step run at once; the others one after
		// another, so the operator is asked one thing at a time.
		Parallel: a.tool.ReadOnly,
	}
}

func (a *agentTool) ProviderOptions() fantasy.ProviderOptions     { return a.opts }
func (a *agentTool) SetProviderOptions(o fantasy.ProviderOptions) { a.opts = o }

// Run never returns a Go error: fantasy would end the whole run. Every
// failure is an error result the model reads.
func (a *agentTool) Run(ctx context.Context, call fantasy.ToolCall) (fantasy.ToolResponse, error) {
	return a.turn.call(ctx, a.tool, call), nil
}

// call runs one tool call: route, check for loops, ask, run, report.
func (t *turn) call(ctx context.Context, tool toolset.Tool, call fantasy.ToolCall) fantasy.ToolResponse {
	s := t.s
	input := json.RawMessage(call.Input)
	if !json.Valid(input) {
		input = nil
	}
	t.send(Event{Type: EventToolCall, Tool: tool.Name, CallID: call.ID, Input: input})
	target := s.target()
	if !s.opts.Each {
		// The operator's /target: a new one forgets the session's grants.
		// The loops of /agent each share one Consent, each on its own
		// host; grants are keyed on the target, and one loop's call must
		// not forget what was granted to another.
		s.opts.Consent.SetTarget(target)
	}
	act, err := s.opts.Toolset.Prepare(ctx, toolset.Call{Tool: tool.Name, Input: json.RawMessage(call.Input), Target: target})
	if err != nil {
		t.send(Event{Type: EventToolResult, Tool: tool.Name, CallID: call.ID, Target: target, IsError: true, Summary: err.Error(), Result: err.Error()})
		return fantasy.NewTextErrorResponse(err.Error())
	}
	if msg := t.loop(tool.Name, string(call.Input)); msg != "" {
		t.send(Event{Type: EventToolResult, Tool: tool.Name, CallID: call.ID, Target: act.Target, IsError: true, Summary: msg, Result: msg})
		return fantasy.ToolResponse{Type: "text", Content: msg, IsError: true, StopTurn: true}
	}
	how, err := s.opts.Consent.Check(ctx, act, call.ID, s.opts.Each)
	t.send(Event{Type: EventConsent, Tool: tool.Name, CallID: call.ID, Command: act.Command, Target: act.Target, Hosts: act.Hosts, Decision: how})
	if err != nil {
		msg := "The operator refused this call (" + act.Command + " on " + act.Target + "). Do not try it another way: stop and say what you wanted to do and why."
		if ctx.Err() != nil {
			msg = "The turn was cancelled before this call ran."
		} else {
			t.stop(OutcomeDenied, fmt.Sprintf("the operator refused %s on %s; the turn stopped", act.Command, act.Target))
		}
		t.send(Event{Type: EventToolResult, Tool: tool.Name, CallID: call.ID, Target: act.Target, IsError: true, Summary: "refused", Result: msg})
		return fantasy.ToolResponse{Type: "text", Content: msg, IsError: true, StopTurn: true}
	}
	t.mu.Lock()
	t.targets[act.Target] = true
	t.mu.Unlock()
	t.send(Event{Type: EventToolStart, Tool: tool.Name, CallID: call.ID, Command: act.Command, Detail: act.Detail, Target: act.Target, Hosts: act.Hosts})
	tc := ToolCall{ID: call.ID, Tool: tool.Name, Command: act.Command, Target: act.Target, Hosts: act.Hosts, Loop: s.opts.Host}
	// Output events are masked as streams (a key split between two chunks
	// is masked too) and carry whole characters.
	live := liveOutput{mask: s.mask, emit: func(host, stream, job, text string) {
		t.send(Event{Type: EventOutput, Tool: tool.Name, CallID: call.ID, Host: host, Stream: stream, Data: text, JobID: job})
	}}
	res := s.opts.Toolset.Run(ctx, act, func(ev toolset.Event) {
		if s.opts.OnTool != nil {
			s.opts.OnTool(tc, ev)
		}
		switch ev.Kind {
		case toolset.EventOutput:
			stream := "stdout"
			if ev.Stderr {
				stream = "stderr"
			}
			live.write(ev.Host, stream, ev.JobID, ev.Data)
		case toolset.EventHostDone:
			live.end(ev.Host)
			t.send(Event{Type: EventHostDone, Tool: tool.Name, CallID: call.ID, Host: ev.Host, Status: ev.Status, IsError: !ev.OK, JobID: ev.JobID})
		case toolset.EventBackground:
			t.send(Event{Type: EventBackground, Tool: tool.Name, CallID: call.ID, JobID: ev.JobID, Hosts: ev.Hosts})
		}
	})
	res.Text, res.Summary = secrets.Mask(res.Text, s.mask), secrets.Mask(res.Summary, s.mask)
	t.send(Event{Type: EventToolResult, Tool: tool.Name, CallID: call.ID, Target: res.Target, Hosts: res.Hosts, IsError: res.IsError,
		Summary: res.Summary, Result: res.Text, JobID: res.JobID})
	if res.IsError {
		return fantasy.NewTextErrorResponse(res.Text)
	}
	return fantasy.NewTextResponse(res.Text)
}

// stop records why the turn must end after this step.
func (t *turn) stop(outcome, msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.outcome == "" {
		t.outcome, t.stopMsg = outcome, msg
	}
}

// loop records a call and, when the same call was made loopRepeats times
// within loopWindow steps, ends the turn.
func (t *turn) loop(tool, input string) string {
	sig := tool + "\x00" + canonicalJSON(input)
	t.mu.Lock()
	step := t.step
	t.calls = append(t.calls, callSig{step: step, sig: sig})
	n := 0
	for _, c := range t.calls {
		if c.sig == sig && c.step > step-loopWindow {
			n++
		}
	}
	t.mu.Unlock()
	if n < loopRepeats {
		return ""
	}
	msg := fmt.Sprintf("stopped: the same %s call was made %d times in %d steps, which looks like a loop; ask again with more to go on", tool, n, loopWindow)
	t.stop(OutcomeLoop, msg)
	return "This exact call was already made " + fmt.Sprint(n-1) + " times; the turn ends here. Tell the operator what you were trying to do."
}

// canonicalJSON writes an object with sorted keys so that key order does
// not hide a repeat.
func canonicalJSON(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return s
	}
	return string(b)
}
