package chain

import (
	"fmt"
	"io"
	"strings"
)

// Trace steps.
const (
	StepCache     = "cache"            // chain cache hit or miss, and why
	StepResolve   = "resolve"          // which file resolved an id, and what it shadowed
	StepIntegrity = "verify_integrity" // content hash of each participating file
	StepValidate  = "validate"         // chain validation result
	StepEnv       = "resolve_env"      // which element contributed which env keys
	StepInterp    = "interpreter"      // how an interpreter was found on the target
	StepAnchor    = "anchor"           // anchor root and whether it is active
	StepConfig    = "config_resolve"   // which config files were merged
	StepParams    = "params"           // parameter coercion and exclusions
	StepTemplate  = "template"         // shell contexts, unresolved placeholders
	StepShip      = "ship"             // files the tool needs on the target
)

// Candidate is a file that could define an id.
type Candidate struct {
	Space Space  `json:"space"`
	Path  string `json:"path"`
}

// TraceEvent is one recorded decision.
type TraceEvent struct {
	Step     string      `json:"step"`
	ItemID   string      `json:"item_id,omitempty"`
	Path     string      `json:"path,omitempty"`
	Space    Space       `json:"space,omitempty"`
	Shadowed []Candidate `json:"shadowed,omitempty"`
	Hash     string      `json:"hash,omitempty"`
	Verified *bool       `json:"verified,omitempty"`
	Keys     []string    `json:"keys,omitempty"`
	Detail   string      `json:"detail,omitempty"`
}

// Trace is the decision log of one Chain, Show or Plan call. A nil *Trace
// records nothing, so callers pass one only when --trace asks for it.
type Trace struct {
	Events []TraceEvent `json:"events"`
}

func (t *Trace) add(ev TraceEvent) {
	if t != nil {
		t.Events = append(t.Events, ev)
	}
}

// WriteText renders the trace for people, one event per line (continuation
// lines for shadowed files).
func (t *Trace) WriteText(w io.Writer) error {
	if t == nil {
		return nil
	}
	var b strings.Builder
	for _, ev := range t.Events {
		fmt.Fprintf(&b, "%-18s", ev.Step)
		var parts []string
		if ev.ItemID != "" {
			parts = append(parts, ev.ItemID)
		}
		if ev.Space != 0 {
			parts = append(parts, "["+ev.Space.String()+"]")
		}
		if ev.Path != "" {
			parts = append(parts, ev.Path)
		}
		if ev.Hash != "" {
			parts = append(parts, "sha256:"+ev.Hash)
		}
		if ev.Verified != nil {
			if *ev.Verified {
				parts = append(parts, "verified")
			} else {
				parts = append(parts, "NOT VERIFIED")
			}
		}
		if len(ev.Keys) > 0 {
			parts = append(parts, "keys: "+strings.Join(ev.Keys, ", "))
		}
		if ev.Detail != "" {
			parts = append(parts, ev.Detail)
		}
		b.WriteString(strings.Join(parts, " "))
		b.WriteByte('\n')
		for _, s := range ev.Shadowed {
			fmt.Fprintf(&b, "%-18s  shadows [%s] %s\n", "", s.Space, s.Path)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String returns WriteText's output.
func (t *Trace) String() string {
	var b strings.Builder
	_ = t.WriteText(&b)
	return b.String()
}

func boolPtr(b bool) *bool { return &b }
