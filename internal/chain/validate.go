package chain

import (
	"fmt"
	"sort"
	"strings"
)

// ProblemKind classifies a validation problem.
type ProblemKind string

// Validation problems.
const (
	// ProblemSpaceOrder: an element depends on a higher-precedence space
	// (a user tool on a project runtime).
	ProblemSpaceOrder ProblemKind = "space_order"
	// ProblemSystemToMutable: a system element depends on a user or project
	// element.
	ProblemSystemToMutable ProblemKind = "system_to_mutable"
	// ProblemIO: the executor's declared inputs are not all among the
	// element's declared outputs.
	ProblemIO ProblemKind = "io_mismatch"
	// ProblemInvalidVersion: a declared version or version bound is not
	// strict semver.
	ProblemInvalidVersion ProblemKind = "invalid_version"
	// ProblemMissingVersion: the executor constrains versions but the
	// element declares none.
	ProblemMissingVersion ProblemKind = "missing_version"
	// ProblemVersionRange: the element's version is outside the executor's
	// min_version/max_version.
	ProblemVersionRange ProblemKind = "version_out_of_range"
)

// Problem is one reason a chain must not run.
type Problem struct {
	Kind    ProblemKind
	Element string // the dependent element (the child)
	Parent  string // its executor, when the problem is about the pair
	Message string // one sentence: what is wrong and what to do
}

func (p Problem) Error() string { return p.Message }

// ValidationError is returned by Plan for a chain with problems.
type ValidationError struct {
	ID       string
	Problems []Problem
}

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Message
	}
	return fmt.Sprintf("tool %s cannot run: %s", e.ID, strings.Join(msgs, " "))
}

func (e *ValidationError) Unwrap() error { return ErrInvalidChain }

// Validate checks every adjacent pair (child, parent) of the chain, and
// every element's own version. It returns nil for a valid chain. An invalid
// version always fails: it is never treated as "no constraint".
func Validate(c *Chain) []Problem {
	var out []Problem
	for _, el := range c.Elements {
		if el.Meta.versionProblem != "" {
			out = append(out, Problem{Kind: ProblemInvalidVersion, Element: el.ID,
				Message: fmt.Sprintf("%s %s: %s.", el.Kind, el.ID, el.Meta.versionProblem)})
			continue
		}
		if el.Meta.Version != "" {
			if _, err := parseSemver(el.Meta.Version); err != nil {
				out = append(out, Problem{Kind: ProblemInvalidVersion, Element: el.ID,
					Message: fmt.Sprintf("%s %s: %v; write MAJOR.MINOR.PATCH, like \"1.0.0\", in %s.", el.Kind, el.ID, err, el.Path)})
			}
		}
	}
	for i := 0; i+1 < len(c.Elements); i++ {
		child, parent := c.Elements[i], c.Elements[i+1]
		pair := fmt.Sprintf("%s %s (%s) depends on %s %s (%s)", child.Kind, child.ID, child.Space, parent.Kind, parent.ID, parent.Space)
		if parent.Space > child.Space {
			if child.Space == SpaceSystem {
				out = append(out, Problem{Kind: ProblemSystemToMutable, Element: child.ID, Parent: parent.ID,
					Message: pair + ": a system element may not depend on mutable user or project files; remove " + parent.Path + " or give it another id."})
			} else {
				out = append(out, Problem{Kind: ProblemSpaceOrder, Element: child.ID, Parent: parent.ID,
					Message: pair + ": an element may only depend on its own or a lower space; move " + parent.ID + " down to the " + child.Space.String() + " space or " + child.ID + " up."})
			}
		}
		if parent.Meta.Inputs != nil && child.Meta.Outputs != nil {
			have := map[string]bool{}
			for _, o := range child.Meta.Outputs {
				have[o] = true
			}
			var missing []string
			for _, in := range parent.Meta.Inputs {
				if !have[in] {
					missing = append(missing, in)
				}
			}
			if len(missing) > 0 {
				out = append(out, Problem{Kind: ProblemIO, Element: child.ID, Parent: parent.ID,
					Message: fmt.Sprintf("%s: %s needs inputs %s that %s does not declare as outputs; add them to its outputs or pick another executor.",
						pair, parent.ID, strings.Join(missing, ", "), child.ID)})
			}
		}
		if cc := parent.Meta.ChildConstraints; cc != nil && (cc.MinVersion != "" || cc.MaxVersion != "") {
			out = append(out, checkConstraint(child, parent, cc)...)
		}
	}
	return out
}

func checkConstraint(child, parent *Element, cc *Constraints) []Problem {
	var out []Problem
	bound := func(name, v string) (semver, bool) {
		if v == "" {
			return semver{}, false
		}
		sv, err := parseSemver(v)
		if err != nil {
			out = append(out, Problem{Kind: ProblemInvalidVersion, Element: child.ID, Parent: parent.ID,
				Message: fmt.Sprintf("%s %s: child_constraints.%s: %v; write MAJOR.MINOR.PATCH in %s.", parent.Kind, parent.ID, name, err, parent.Path)})
			return semver{}, false
		}
		return sv, true
	}
	lo, hasLo := bound("min_version", cc.MinVersion)
	hi, hasHi := bound("max_version", cc.MaxVersion)
	if len(out) > 0 {
		return out
	}
	if child.Meta.Version == "" {
		return append(out, Problem{Kind: ProblemMissingVersion, Element: child.ID, Parent: parent.ID,
			Message: fmt.Sprintf("%s %s declares no version but %s %s requires %s; add a version to %s.", child.Kind, child.ID, parent.Kind, parent.ID, rangeText(cc), child.Path)})
	}
	v, err := parseSemver(child.Meta.Version)
	if err != nil || child.Meta.versionProblem != "" {
		// Already reported as the element's own problem; the constraint
		// fails with it rather than passing.
		return out
	}
	if hasLo && v.compare(lo) < 0 || hasHi && v.compare(hi) > 0 {
		out = append(out, Problem{Kind: ProblemVersionRange, Element: child.ID, Parent: parent.ID,
			Message: fmt.Sprintf("%s %s is version %s but %s %s requires %s; update one of them.", child.Kind, child.ID, child.Meta.Version, parent.Kind, parent.ID, rangeText(cc))})
	}
	return out
}

func rangeText(cc *Constraints) string {
	switch {
	case cc.MinVersion != "" && cc.MaxVersion != "":
		return fmt.Sprintf("a version from %s to %s", cc.MinVersion, cc.MaxVersion)
	case cc.MinVersion != "":
		return "version " + cc.MinVersion + " or later"
	}
	return "version " + cc.MaxVersion + " or earlier"
}

// ShowResult is what `rex tool show ID` prints: the chain and its validation.
type ShowResult struct {
	Chain    *Chain
	Problems []Problem // nil when the chain is valid
	Trace    *Trace    // nil unless asked for
	// NotRunnable says why the id is not a tool (a runtime or the
	// primitive); nil for a tool.
	NotRunnable error
	Params      []Param  // the tool's parameters, required first
	Secrets     []string // the secrets the chain declares
}

// Param is one parameter as config_schema declares it.
type Param struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Default     any    `json:"default,omitempty"`
	Required    bool   `json:"required"`
	Enum        []any  `json:"enum,omitempty"`
	Description string `json:"description,omitempty"`
}

// Params lists the parameters a config_schema declares: the required ones
// first, then by name.
func Params(schema map[string]any) []Param {
	props, _ := schema["properties"].(map[string]any)
	req := map[string]bool{}
	if list, ok := schema["required"].([]any); ok {
		for _, r := range list {
			if n, ok := r.(string); ok {
				req[n] = true
			}
		}
	}
	out := make([]Param, 0, len(props))
	for name, pv := range props {
		prop, _ := pv.(map[string]any)
		p := Param{Name: name, Type: "string", Required: req[name]}
		if prop != nil {
			p.Type = schemaType(prop)
			if t, ok := prop["type"].([]any); ok {
				var names []string
				for _, x := range t {
					if s, ok := x.(string); ok {
						names = append(names, s)
					}
				}
				p.Type = strings.Join(names, "|")
			}
			p.Default = prop["default"]
			p.Enum, _ = prop["enum"].([]any)
			p.Description, _ = prop["description"].(string)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Required != out[j].Required {
			return out[i].Required
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Example is a command line that runs the tool, with a value for every
// required parameter: its first allowed value, its default, or its name in
// capitals.
func (r *ShowResult) Example() string {
	var b strings.Builder
	b.WriteString("rex tool run " + r.Chain.ID)
	for _, p := range r.Params {
		if !p.Required {
			continue
		}
		v := strings.ToUpper(p.Name)
		switch {
		case len(p.Enum) > 0:
			v, _ = scalarString(p.Enum[0])
		case p.Default != nil:
			if s, ok := scalarString(p.Default); ok {
				v = s
			}
		}
		if v == "" || strings.ContainsAny(v, " \t\n'\"$`\\*?[]{}()<>|&;#~") {
			v = "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
		}
		b.WriteString(" --param " + p.Name + "=" + v)
	}
	return b.String()
}

// Show resolves and validates id. With trace set, the result carries the
// decision log.
func (e *Engine) Show(id string, trace bool) (*ShowResult, error) {
	var tr *Trace
	if trace {
		tr = &Trace{}
	}
	c, err := e.Chain(id, tr)
	if err != nil {
		return nil, err
	}
	probs := Validate(c)
	detail := "valid"
	if len(probs) > 0 {
		detail = fmt.Sprintf("%d problem(s)", len(probs))
	}
	tr.add(TraceEvent{Step: StepValidate, ItemID: id, Detail: detail})
	return &ShowResult{Chain: c, Problems: probs, Trace: tr, NotRunnable: c.Runnable(),
		Params: Params(c.Tool().Meta.ConfigSchema), Secrets: c.Secrets()}, nil
}
