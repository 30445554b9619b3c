package chain

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Templating happens in two passes, as in the seed design, but on segments
// rather than on flat strings, so that text that came from a user parameter
// or from the environment is never scanned again:
//
//   - Pass 1 replaces ${VAR} and ${VAR:-default} in template text (runtime
//     and tool config written by their authors) with values from the
//     resolved environment.
//   - Pass 2 replaces {name} with a value: an execution context value
//     (tool_path, project_path, anchor_path, ...), a scalar config value, or
//     a user parameter. Config values may refer to each other; they are
//     resolved repeatedly until stable, at most maxTemplateRounds times.
//
// User parameter values are inserted last and verbatim: a parameter holding
// "${SECRET}" or "{tool_path}" stays exactly that. When a template is a
// shell command line (the argument after -c of sh, bash, ...), every
// substituted value, whatever it contains, is single-quoted as one word,
// and a placeholder inside quotes written by the template author is
// refused, because no quoting can be correct there.

const (
	maxTemplateRounds = 3
	maxValueBytes     = 1 << 20
)

// seg is a piece of a value: template text that pass 2 may still expand,
// or final text (a parameter, an env value, a path) that it never touches.
// param marks text that came from a user parameter.
type seg struct {
	text  string
	final bool
	param bool
}

// placeholderRE matches {name}.
var placeholderRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// pass1 expands ${VAR} in trusted template text, producing segments whose
// expansions are final.
func pass1(s string, lookup lookupFunc) []seg {
	var out []seg
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			continue
		}
		ref, ok := scanVar(s, i)
		if !ok {
			continue
		}
		if i > start {
			out = append(out, seg{text: s[start:i]})
		}
		out = append(out, seg{text: ref.value(lookup, 0), final: true})
		i = ref.end - 1
		start = ref.end
	}
	if start < len(s) {
		out = append(out, seg{text: s[start:]})
	}
	return out
}

// substitute replaces {name} placeholders found in the non-final segments
// with vals[name] (spliced in as they are), leaving unknown names alone.
func substitute(segs []seg, vals map[string][]seg) ([]seg, bool) {
	var out []seg
	changed := false
	for _, s := range segs {
		if s.final || !strings.Contains(s.text, "{") {
			out = append(out, s)
			continue
		}
		pos := 0
		for _, m := range placeholderRE.FindAllStringSubmatchIndex(s.text, -1) {
			v, ok := vals[s.text[m[2]:m[3]]]
			if !ok {
				continue
			}
			if m[0] > pos {
				out = append(out, seg{text: s.text[pos:m[0]]})
			}
			out = append(out, v...)
			pos = m[1]
			changed = true
		}
		if pos < len(s.text) {
			out = append(out, seg{text: s.text[pos:]})
		}
	}
	return out, changed
}

func segsLen(segs []seg) int {
	n := 0
	for _, s := range segs {
		n += len(s.text)
	}
	return n
}

func flatten(segs []seg) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.text)
	}
	return b.String()
}

// resolveValues expands the value map's references to itself until nothing
// changes, at most maxTemplateRounds rounds, and flattens it. References
// still pending after that are a cycle (or nesting too deep) and an error.
// tainted names the values that hold text from a parameter.
func resolveValues(vals map[string][]seg) (out map[string]string, tainted map[string]bool, err error) {
	for range maxTemplateRounds {
		next := make(map[string][]seg, len(vals))
		changed := false
		for k, segs := range vals {
			ns, ch := substitute(segs, vals)
			if segsLen(ns) > maxValueBytes {
				return nil, nil, fmt.Errorf("template value {%s} grows beyond %d bytes", k, maxValueBytes)
			}
			next[k] = ns
			changed = changed || ch
		}
		vals = next
		if !changed {
			break
		}
	}
	var pending []string
	for k, segs := range vals {
		if _, ch := substitute(segs, vals); ch {
			pending = append(pending, "{"+k+"}")
		}
	}
	if len(pending) > 0 {
		sort.Strings(pending)
		return nil, nil, fmt.Errorf("config values %s still refer to each other after %d rounds of substitution; break the cycle", strings.Join(pending, ", "), maxTemplateRounds)
	}
	out = make(map[string]string, len(vals))
	tainted = map[string]bool{}
	for k, segs := range vals {
		out[k] = flatten(segs)
		for _, s := range segs {
			if s.param {
				tainted[k] = true
			}
		}
	}
	return out, tainted, nil
}

// renderMode is what the rendered text is to the program that reads it.
type renderMode int

const (
	modeData     renderMode = iota // data: values inserted verbatim
	modeShell                      // a shell command line: values single-quoted, placeholders only where that makes one word
	modeNoParams                   // program text, a program name or an option: values verbatim, parameters refused
)

// renderOpts configures one template rendering.
type renderOpts struct {
	lookup     lookupFunc        // pass 1 variables
	vals       map[string]string // pass 2 values, fully resolved
	mode       renderMode
	tainted    map[string]bool // values that hold parameter text
	paramsJSON *string         // non-nil: {params_json} may appear (stdin only)
	what       string          // names the template in errors
	// secret names the variables that are secrets: a template may not
	// refer to them.
	secret map[string]bool
	// numeric names the parameters the schema declares integer or number
	// (their values were checked as numbers): they may go where the shell
	// evaluates arithmetic.
	numeric map[string]bool
	// shell is the program that reads a modeShell template; tool is the
	// tool being planned, for errors.
	shell, tool string
	// refusal explains, for modeNoParams, why a parameter may not go
	// here; it follows "{name} carries a parameter into ...".
	refusal string
}

// render expands one template string in a single scan: pass 1 for ${VAR},
// pass 2 for {name}. Substituted text is never scanned again. It returns the
// names it could not resolve (they stay as written) and the names of the
// substituted values that hold parameter text.
func render(tmpl string, o renderOpts) (string, []string, error) {
	out, unresolved, _, err := renderTaint(tmpl, o)
	return out, unresolved, err
}

func renderTaint(tmpl string, o renderOpts) (string, []string, []string, error) {
	var b strings.Builder
	var unresolved, used []string
	lx := shellLexer{arith: arithShell(o.shell)}
	emit := func(v, name string, param bool) error {
		if param {
			used = append(used, name)
		}
		switch o.mode {
		case modeNoParams:
			if param {
				return fmt.Errorf("%s: %s carries a parameter into %s", o.what, name, o.refusal)
			}
		case modeShell:
			if why := lx.noWord(); why != "" {
				return fmt.Errorf("%s: %s sits %s", o.what, name, why)
			}
			if end := b.String(); strings.HasSuffix(end, "$") && !strings.HasSuffix(end, "\\$") {
				return fmt.Errorf("%s: %s follows a $, where the shell would read the quoted value as $'...' with escapes; put a space or quotes between them", o.what, name)
			}
			numeric := o.numeric[strings.Trim(name, "{}")]
			if why := lx.arithWhy(); why != "" {
				if !numeric {
					return arithError(o, name, why)
				}
				// A number checked as one needs no quotes, and arithmetic
				// takes none: (( '5' > 1 )) is a syntax error.
				b.WriteString(v)
				lx.word(name, false)
				return nil
			}
			b.WriteString(shellQuote(v))
			lx.word(name, !numeric)
			return nil
		}
		b.WriteString(v)
		return nil
	}
	for i := 0; i < len(tmpl); {
		c := tmpl[i]
		if c == '$' {
			if ref, ok := scanVar(tmpl, i); ok {
				if o.secret[ref.name] {
					return "", nil, nil, fmt.Errorf("%s: ${%s} names a secret; secrets reach the tool as environment only and never enter its command line or config: read $%s inside the tool", o.what, ref.name, ref.name)
				}
				if err := emit(ref.value(o.lookup, 0), "${"+ref.name+"}", false); err != nil {
					return "", nil, nil, err
				}
				i = ref.end
				continue
			}
		}
		if c == '{' {
			if m := placeholderRE.FindStringSubmatchIndex(tmpl[i:]); m != nil && m[0] == 0 {
				name := tmpl[i+m[2] : i+m[3]]
				end := i + m[1]
				switch v, ok := o.vals[name]; {
				case name == "params_json" && o.paramsJSON == nil:
					return "", nil, nil, fmt.Errorf("%s: {params_json} may only appear in input_data; parameters travel on stdin, never on the command line", o.what)
				case name == "params_json":
					if err := emit(*o.paramsJSON, "{params_json}", true); err != nil {
						return "", nil, nil, err
					}
				case ok:
					if err := emit(v, "{"+name+"}", o.tainted[name]); err != nil {
						return "", nil, nil, err
					}
				default:
					unresolved = append(unresolved, name)
					b.WriteString(tmpl[i:end])
					if o.mode == modeShell {
						lx.feed(tmpl[i:end])
					}
				}
				i = end
				continue
			}
		}
		if o.mode == modeShell {
			n := lx.step(tmpl, i)
			b.WriteString(tmpl[i : i+n])
			i += n
			continue
		}
		b.WriteByte(c)
		i++
	}
	if o.mode == modeShell {
		lx.finish()
	}
	if lx.err != "" {
		return "", nil, nil, arithError(o, "", lx.err)
	}
	if lx.cmdErr != "" {
		return "", nil, nil, fmt.Errorf("%s: %s", o.what, lx.cmdErr)
	}
	return b.String(), unresolved, used, nil
}

// arithError refuses a placeholder where the shell evaluates arithmetic.
func arithError(o renderOpts, name, why string) error {
	if name != "" {
		why = name + " sits " + why
	}
	where := o.what
	if !strings.Contains(where, o.tool) {
		where = "tool " + o.tool + ", " + where
	}
	return fmt.Errorf("%s: %s, where %s evaluates the value as arithmetic and runs any command in it (a[$(cmd)]) whatever its quotes; only a parameter declared type: integer or number in the tool's schema may go there, as its values are checked as numbers", where, why, o.shell)
}
