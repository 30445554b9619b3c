package agent

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync"

	"github.com/rexconsole/rex/internal/toolset"
)

// Decision is the operator's answer to a consent request.
type Decision int

const (
	// Deny refuses the call; the model is told and the turn stops.
	Deny Decision = iota
	// AllowOnce runs this call.
	AllowOnce
	// AllowSession runs this call and every later call of the same tool
	// on the same target, until the target changes.
	AllowSession
	// AllowAll runs this exact command on every host it is asked for in
	// one /agent each run ("allow this command on all 12").
	AllowAll
)

func (d Decision) String() string {
	switch d {
	case AllowOnce:
		return "allow once"
	case AllowSession:
		return "allow for this session"
	case AllowAll:
		return "allow on all hosts"
	}
	return "deny"
}

// Request is what the operator is asked about: the exact command or diff,
// and where it will run.
type Request struct {
	CallID  string
	Tool    string
	Target  string
	Hosts   []string
	Command string
	Detail  string
	// Reason says why the call asks although something would allow it (a
	// deny pattern matched).
	Reason string
	// Each is set in an /agent each run, where AllowAll applies.
	Each bool
}

// Asker asks the operator and blocks until an answer or ctx ends. A front
// end that cannot ask (rex ask without --yes) returns Deny.
type Asker func(ctx context.Context, r Request) (Decision, error)

// How a consent check ended, for the transcript.
const (
	ConsentReadOnly = "read-only"
	ConsentYolo     = "yolo"
	ConsentAllowed  = "allowed by config"
	ConsentTool     = "allowed tool"
	ConsentSession  = "allowed for this session"
	ConsentAll      = "allowed on all hosts"
	ConsentAsked    = "asked"
	ConsentRefused  = "refused"
)

// Consent decides whether a call may run. Read-only tools always may;
// --yolo lets everything run except what a deny pattern names; the
// config's allow prefixes let plain commands run; grants for the session
// are keyed on tool and target and cleared when the target changes;
// anything else asks.
//
// Nothing a tool returns ever reaches this service: output from hosts is
// data and cannot grant consent or change the target.
type Consent struct {
	// Yolo skips asking (the status bar says so).
	Yolo bool
	// AllowTools run without asking (rex ask --allow bash).
	AllowTools []string
	// Allow are command prefixes that run without asking; Deny glob
	// patterns of commands that always ask.
	Allow, Deny []string
	Ask         Asker

	// asking puts one question to the operator at a time; a question that
	// waited is checked again against the grants the earlier answers made
	// ("allow on all 12" answers the other eleven).
	asking chan struct{}

	mu     sync.Mutex
	target string
	grants map[string]bool // sessionKey
	all    map[string]bool // Action.Key, for /agent each
}

// ErrDenied is a refused call.
var ErrDenied = errors.New("the operator refused this call")

// SetTarget tells the service where calls now go; a different target
// forgets the grants for the session.
func (c *Consent) SetTarget(target string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if target != c.target {
		c.grants = nil
	}
	c.target = target
}

// Reset forgets every grant (a new conversation).
func (c *Consent) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grants, c.all = nil, nil
}

// forgetAll forgets the "allow on all hosts" answers: an /agent each run
// ended.
func (c *Consent) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = nil
}

// Check decides on a prepared call. It returns how it was decided, and
// ErrDenied when the call must not run.
func (c *Consent) Check(ctx context.Context, a *toolset.Action, callID string, each bool) (string, error) {
	if a.Tool.ReadOnly {
		return ConsentReadOnly, nil
	}
	req := Request{CallID: callID, Tool: a.Tool.Name, Target: a.Target, Hosts: a.Hosts, Command: a.Command, Detail: a.Detail, Each: each}
	denied := a.Tool.Name == toolset.Bash && (matchAny(c.Deny, a.Command) || a.Stdin != "" && matchAny(c.Deny, a.Stdin))
	if denied {
		req.Reason = "it matches a deny pattern of the config, so it always asks"
	} else if how := c.granted(a, each); how != "" {
		return how, nil
	}
	if c.Ask == nil {
		return ConsentRefused, ErrDenied
	}
	c.mu.Lock()
	if c.asking == nil {
		c.asking = make(chan struct{}, 1)
	}
	sem := c.asking
	c.mu.Unlock()
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		return ConsentRefused, ctx.Err()
	}
	defer func() { <-sem }()
	if !denied {
		if how := c.granted(a, each); how != "" {
			return how, nil
		}
	}
	d, err := c.Ask(ctx, req)
	if err != nil {
		return ConsentRefused, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch d {
	case AllowOnce:
		return ConsentAsked, nil
	case AllowSession:
		if !denied {
			if c.grants == nil {
				c.grants = map[string]bool{}
			}
			c.grants[sessionKey(a)] = true
		}
		return ConsentAsked, nil
	case AllowAll:
		if !denied {
			if c.all == nil {
				c.all = map[string]bool{}
			}
			c.all[a.Key()] = true
		}
		return ConsentAsked, nil
	}
	return ConsentRefused, ErrDenied
}

// sessionKey is what "allow for this session" covers: the tool, and for
// a chain tool the rex tool behind its name (tool files added later can
// give the name to another), on the target.
func sessionKey(a *toolset.Action) string {
	return a.Tool.Name + "\x00" + a.Tool.ChainID + "\x00" + a.Target
}

// granted says how a call may run without asking, or "".
func (c *Consent) granted(a *toolset.Action, each bool) string {
	c.mu.Lock()
	session := c.grants[sessionKey(a)]
	all := c.all[a.Key()]
	c.mu.Unlock()
	switch {
	case c.Yolo:
		return ConsentYolo
	case contains(c.AllowTools, a.Tool.Name):
		return ConsentTool
	case a.Tool.Name == toolset.Bash && a.Stdin == "" && allowedPrefix(c.Allow, a.Command):
		return ConsentAllowed
	case session:
		return ConsentSession
	case each && all:
		return ConsentAll
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// allowedPrefix reports whether a command is one of the allowed ones (a
// call that gives it stdin never is: that text is a program to sh,
// python3 or mysql, as it would be after -c or -e): it
// starts with an allowed prefix at a word boundary and holds nothing a
// shell would treat as more than one plain command (no ; & | < > $ `
// parentheses, braces, backslashes or newlines), so "df; rm -rf ~" never
// passes for "df".
func allowedPrefix(prefixes []string, cmd string) bool {
	cmd = strings.TrimSpace(cmd)
	if cmd == "" || strings.ContainsAny(cmd, ";&|<>$`(){}\\\n\r*?[]~!#") {
		return false
	}
	for _, p := range prefixes {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if cmd == p || strings.HasPrefix(cmd, p+" ") || strings.HasPrefix(cmd, p+"\t") {
			return true
		}
	}
	return false
}

// matchAny reports whether a command matches one of the deny patterns:
// shell-style globs over the whole command line ("*reboot*"), or, for a
// pattern without wildcards, the command's first words ("rm -rf").
func matchAny(patterns []string, cmd string) bool {
	cmd = strings.TrimSpace(cmd)
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.ContainsAny(p, "*?[") {
			if cmd == p || strings.HasPrefix(cmd, p+" ") || strings.Contains(cmd, p) {
				return true
			}
			continue
		}
		if ok, err := path.Match(p, cmd); err == nil && ok {
			return true
		}
		// path.Match's * stops at '/'; commands hold paths, so try the
		// pattern against the command with slashes taken out too.
		if ok, err := path.Match(strings.ReplaceAll(p, "/", "\x00"), strings.ReplaceAll(cmd, "/", "\x00")); err == nil && ok {
			return true
		}
	}
	return false
}
