package chain

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostile are parameter values that must reach the tool byte for byte and
// do nothing else.
var hostile = []string{
	"$(touch PWNED)",
	"`touch PWNED`",
	"; touch PWNED",
	"a && touch PWNED",
	"| touch PWNED",
	"' ; touch PWNED ; '",
	`" ; touch PWNED ; "`,
	"it's",
	"two  spaces",
	"*",
	"${SECRET}",
	"$SECRET",
	"{tool_path}",
	"{params_json}",
	`back\slash`,
	"new\nline",
	"-n",
	"",
	"$((1+1))",
	"~",
}

func hostileProject(t *testing.T) string {
	return project(t, map[string]string{
		".env": "SECRET=s3cr3t\n",
		// A shell command line: {msg} is substituted into the argument after -c.
		".ai/tools/h/shell.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\n" +
			"config:\n  command: /bin/sh\n  args: [\"-c\", \"printf '[%s]\\\\n' {msg} {greeting}\"]\n  greeting: \"hi {msg}\"\n  input_data: \"{params_json}\"\n",
		// An argv: {msg} is one argument, no shell involved.
		".ai/tools/h/argv.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\n" +
			"config:\n  command: printf\n  args: [\"[%s]\\n\", \"{msg}\", \"hi {msg}\"]\n  input_data: \"{params_json}\"\n",
		// The shell is not argv[0]: env sh -c ... is a command line too.
		".ai/tools/h/envsh.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\n" +
			"config:\n  command: env\n  args: [\"sh\", \"-c\", \"printf '[%s]\\\\n' {msg} {greeting}\"]\n  greeting: \"hi {msg}\"\n  input_data: \"{params_json}\"\n",
		".ai/tools/h/tenvsh.yaml": "executor_id: h/envsh\n",
		".ai/tools/h/tshell.yaml": "executor_id: h/shell\n",
		".ai/tools/h/targv.yaml":  "executor_id: h/argv\n",
		".ai/tools/h/tbash.sh":    "#!/bin/bash\n# rex: executor_id: rex/core/runtimes/bash/bash\nprintf '[%s]\\n' \"$REX_PARAM_MSG\"\n",
	})
}

func TestHostileParameters(t *testing.T) {
	proj := hostileProject(t)
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, map[string]string{"SECRET": "from-target"})
	for _, tool := range []string{"h/tshell", "h/tenvsh", "h/targv", "h/tbash"} {
		for _, v := range hostile {
			pl, err := e.Plan(t.Context(), PlanRequest{ID: tool, Params: map[string]string{"msg": v}, Target: tgt})
			if err != nil {
				t.Fatalf("%s %q: %v", tool, v, err)
			}
			var out, errb bytes.Buffer
			code, err := Run(t.Context(), pl, tgt, &out, &errb)
			if err != nil || code != 0 {
				t.Fatalf("%s %q: exit %d %v: %s", tool, v, code, err, errb.String())
			}
			want := "[" + v + "]\n"
			if tool != "h/tbash" {
				want += "[hi " + v + "]\n"
			}
			if out.String() != want {
				t.Errorf("%s %q: output %q, want %q", tool, v, out.String(), want)
			}
			// params_json carries the value intact too.
			var got map[string]any
			if err := json.Unmarshal(pl.Stdin, &got); err != nil || got["msg"] != v {
				t.Errorf("%s %q: stdin %s", tool, v, pl.Stdin)
			}
		}
	}
	// No side effect anywhere: not in the project (the working directory),
	// not in the tool's directory.
	err := filepath.Walk(proj, func(p string, _ os.FileInfo, err error) error {
		if err == nil && filepath.Base(p) == "PWNED" {
			t.Errorf("a hostile value ran: %s exists", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestShellQuoteRoundTrip(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range hostile {
		q := shellQuote(v)
		out, err := exec.Command(sh, "-c", "printf '%s' "+q).Output()
		if err != nil || string(out) != v {
			t.Errorf("shellQuote(%q) = %s: sh printed %q (%v)", v, q, out, err)
		}
	}
}

func TestTemplateRules(t *testing.T) {
	rt := func(args string, extra string) string {
		return "executor_id: rex/core/primitives/execute\nconfig:\n  command: /bin/sh\n  args: " + args + "\n" + extra
	}
	proj := project(t, map[string]string{
		".ai/tools/t/quoted.yaml":   rt(`["-c", "echo '{msg}'"]`, ""),
		".ai/tools/t/dquoted.yaml":  rt(`["-c", "echo \"x {msg}\""]`, ""),
		".ai/tools/t/pjargs.yaml":   rt(`["-c", "echo", "{params_json}"]`, ""),
		".ai/tools/t/reserved.yaml": rt(`["-c", "printf '%s|' \"$0\" \"$1\"", "{command}", "{tool_id}"]`, "  input_data: \"{params_json}\"\n"),
		".ai/tools/t/nested.yaml": rt(`["-c", "printf '%s\\n' {a}"]`,
			"  a: \"{b}/{tool_id}\"\n  b: \"{c}\"\n  c: \"${HOME_DIR:-none}-{msg}\"\n"),
		".ai/tools/t/cycle.yaml":      rt(`["{a}"]`, "  a: \"{b}\"\n  b: \"{a}\"\n"),
		".ai/tools/t/unknown.yaml":    rt(`["-c", "true", "{nope}"]`, ""),
		".ai/tools/t/envq.yaml":       rt(`["-c", "printf '%s\\n' ${HOME_DIR}"]`, ""),
		".ai/tools/t/escaped.yaml":    rt(`["-c", "printf '%s\\n' \\{msg}"]`, ""),
		".ai/tools/t/tool.yaml":       "executor_id: t/nested\n",
		".ai/tools/t/pycode.yaml":     "executor_id: rex/core/primitives/execute\nconfig:\n  command: python3\n  args: [\"-c\", \"print('{msg}')\"]\n",
		".ai/tools/t/pyindirect.yaml": "executor_id: rex/core/primitives/execute\nconfig:\n  command: /usr/bin/env\n  args: [python3, \"-c\", \"print({quoted})\"]\n  quoted: \"'{msg}'\"\n",
		".ai/tools/t/pyctx.yaml":      "executor_id: rex/core/primitives/execute\nconfig:\n  command: python3\n  args: [\"-c\", \"import sys; print(sys.argv[1], '{tool_id}')\", \"{msg}\"]\n  input_data: \"{params_json}\"\n",
		".ai/tools/t/override.yaml":   "executor_id: t/nested\nconfig:\n  c: \"tool-{msg}\"\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, map[string]string{"HOME_DIR": "/home/o'neil $x"})
	plan := func(id string, params map[string]string) (*Plan, error) {
		return e.Plan(t.Context(), PlanRequest{ID: id, Params: params, Target: tgt, Trace: true})
	}
	run := func(pl *Plan) string {
		var out bytes.Buffer
		if code, err := Run(t.Context(), pl, tgt, &out, &out); err != nil || code != 0 {
			t.Fatalf("run %v: %d %v %s", pl.Argv, code, err, out.String())
		}
		return out.String()
	}

	_, err := plan("t/quoted", map[string]string{"msg": "x"})
	errorContains(t, err, "{msg} sits inside quotes in a shell command")
	_, err = plan("t/dquoted", map[string]string{"msg": "x"})
	errorContains(t, err, "{msg} sits inside quotes")
	_, err = plan("t/pjargs", nil)
	errorContains(t, err, "{params_json} may only appear in input_data")

	// Parameters never become program text of another interpreter,
	// directly or through a config value; context values may.
	_, err = plan("t/pycode", map[string]string{"msg": "x"})
	errorContains(t, err, "{msg} carries a parameter into program text", "read parameters from stdin")
	_, err = plan("t/pyindirect", map[string]string{"msg": "x"})
	errorContains(t, err, "{quoted} carries a parameter into program text")
	pl, err := plan("t/pyctx", map[string]string{"msg": "<a&b>'\")"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(pl); got != "<a&b>'\") t/pyctx\n" {
		t.Errorf("pyctx: %q", got)
	}
	if string(pl.Stdin) != `{"msg":"<a&b>'\")"}` {
		t.Errorf("params_json %s: want <, > and & as typed", pl.Stdin)
	}

	// Parameters named like primitive config or context keys are not
	// template values; they still travel in params_json.
	pl, err = plan("t/reserved", map[string]string{"command": "rm -rf /", "tool_id": "evil"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(pl); got != "{command}|t/reserved|" {
		t.Errorf("reserved names: %q", got)
	}
	if !strings.Contains(string(pl.Stdin), `"command":"rm -rf /"`) || !strings.Contains(pl.Trace.String(), "keys: command, tool_id named like primitive config or context keys") {
		t.Errorf("stdin %s\ntrace %s", pl.Stdin, pl.Trace)
	}

	// Config values refer to each other and settle; ${VAR} in config
	// expands (pass 1) but never inside a parameter.
	pl, err = plan("t/tool", map[string]string{"msg": "${HOME_DIR}"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := run(pl), "/home/o'neil $x-${HOME_DIR}/t/tool\n"; got != want {
		t.Errorf("nested: %q, want %q", got, want)
	}
	// The tool's config overrides its runtime's.
	pl, err = plan("t/override", map[string]string{"msg": "m"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(pl); got != "tool-m/t/override\n" {
		t.Errorf("override: %q", got)
	}

	_, err = plan("t/cycle", nil)
	errorContains(t, err, "{a}, {b} still refer to each other after 3 rounds")

	pl, err = plan("t/unknown", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pl.Argv[3] != "{nope}" || len(pl.Warnings) != 1 || !strings.Contains(pl.Warnings[0], "{nope} has no value") {
		t.Errorf("unknown placeholder: argv %q warnings %q", pl.Argv, pl.Warnings)
	}
	// An environment value in a shell command line is quoted as well.
	pl, err = plan("t/envq", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(pl); got != "/home/o'neil $x\n" {
		t.Errorf("env in shell: %q", got)
	}
	pl, err = plan("t/escaped", map[string]string{"msg": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(pl); got != "{msg}\n" {
		t.Errorf("escaped placeholder: %q", got)
	}
}

func TestParams(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/p/tool.py": `__executor_id__ = "p/rt"
CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "count": {"type": "integer", "default": 3},
        "ratio": {"type": ["number", "null"]},
        "loud": {"type": "boolean"},
        "tags": {"type": "array"},
        "opts": {"type": "object"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
`,
		".ai/tools/p/rt.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\nconfig:\n  command: \"true\"\n  input_data: \"{params_json}\"\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "p/tool", Target: localTarget(t, nil), Params: map[string]string{
		"name": "x", "ratio": "0.5", "loud": "true", "tags": `["a","b"]`, "opts": `{"k":1}`}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"count":3,"loud":true,"name":"x","opts":{"k":1},"ratio":0.5,"tags":["a","b"]}`; string(pl.Stdin) != want {
		t.Errorf("stdin %s\nwant  %s", pl.Stdin, want)
	}
	for _, tt := range []struct {
		params map[string]string
		want   string
	}{
		{map[string]string{}, "tool p/tool needs parameter name; pass --param name=VALUE"},
		{map[string]string{"name": "x", "count": "many"}, `parameter count: "many" is not an integer`},
		{map[string]string{"name": "x", "tags": "{}"}, "is not a JSON array"},
		{map[string]string{"name": "x", "bogus": "1"}, "tool p/tool has no parameter bogus"},
		{map[string]string{"name": "x", "bad name": "1"}, `parameter name "bad name" is not valid`},
		{map[string]string{"name": "x", "resolved_config": "1"}, "resolved_config is reserved"},
	} {
		_, err := e.Plan(t.Context(), PlanRequest{ID: "p/tool", Target: localTarget(t, nil), Params: tt.params})
		errorContains(t, err, tt.want)
	}
}

func TestConfigResolve(t *testing.T) {
	tool := func(mode string) string {
		return "executor_id: rex/core/primitives/execute\nconfig_resolve: {path: web/search.yaml, mode: " + mode + "}\nconfig:\n  command: \"true\"\n  input_data: \"{params_json}\"\n"
	}
	proj := project(t, map[string]string{
		".ai/tools/c/deep.yaml":      tool("deep_merge"),
		".ai/tools/c/first.yaml":     tool("first_match"),
		".ai/tools/c/none.py":        "__executor_id__ = 'rex/core/primitives/execute'\nCONFIG_RESOLVE = {'path': 'absent.yaml', 'mode': 'first_match'}\nCONFIG = {'command': 'true', 'input_data': '{params_json}'}\n",
		".ai/config/web/search.yaml": "engine: {name: project}\nlimit: 5\n",
	})
	user := project(t, map[string]string{".ai/config/web/search.yaml": "engine: {key: user-key}\nlist: [u]\n"})
	sys := mapFS(map[string]string{".ai/config/web/search.yaml": "engine: {name: system, url: http://x}\nlimit: 1\nlist: [s1, s2]\n"})
	e := newEngine(t, Options{ProjectRoot: proj, UserRoot: user, System: sys})
	for id, want := range map[string]string{
		"c/deep":  `{"resolved_config":{"engine":{"key":"user-key","name":"project","url":"http://x"},"limit":5,"list":["u"]}}`,
		"c/first": `{"resolved_config":{"engine":{"name":"project"},"limit":5}}`,
		"c/none":  `{"resolved_config":{}}`,
	} {
		pl, err := e.Plan(t.Context(), PlanRequest{ID: id, Target: localTarget(t, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if string(pl.Stdin) != want {
			t.Errorf("%s: %s\nwant %s", id, pl.Stdin, want)
		}
	}
	_, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := project(t, map[string]string{".ai/tools/c/bad.yaml": "executor_id: rex/core/primitives/execute\nconfig_resolve: {path: ../../etc/passwd}\n"})
	_, err = newEngine(t, Options{ProjectRoot: bad}).Chain("c/bad", nil)
	errorContains(t, err, "climbs out")
}

// TestArithmeticVerdicts: where bash evaluates a word as arithmetic, a
// quoted value still runs a[$(cmd)]; the lexer finds those places.
func TestArithmeticVerdicts(t *testing.T) {
	for _, tt := range []struct {
		shell, tmpl string
		refused     bool
	}{
		{"bash", "[[ {v} -gt 5 ]]", true},
		{"bash", "if [[ {v} -gt 5 ]]; then :; fi", true},
		{"bash", "while ! let {v}; do :; done", true},
		{"bash", "[[ 5 -le {v} ]]", true},
		{"bash", "[[ x{v} -eq 5 ]]", true},
		{"bash", "[[ -v {v} ]]", true},
		{"bash", "[[ {v} == 5 ]]", false},
		{"bash", "[[ {v} == 5 && $x -gt 1 ]]", false},
		{"bash", "[[ $x -gt 1 && {v} == y ]]", false},
		{"bash", "(( {v} > 5 ))", true},
		{"bash", "echo $(( {v} + 1 ))", true},
		{"bash", "let x={v}", true},
		{"bash", "let x=1; echo {v}", false},
		{"bash", "declare -i n={v}", true},
		{"bash", "local -ri n={v}", true},
		{"bash", "typeset -i n; n={v}", true},
		{"bash", "declare n={v}", false},
		{"bash", "declare -i n=1; m={v}", false},
		{"bash", "echo ${a[{v}]}", true},
		{"bash", "a[{v}]=x", true},
		{"bash", "unset a[{v}]", true},
		{"bash", "echo ${x:{v}}", true},
		{"bash", "echo ${x:-{v}}", false},
		{"bash", "echo ${a[1]:-{v}}", false},
		{"bash", "unset {v}", true},
		{"bash", "read -r {v}", true},
		{"bash", "printf -v {v} %s x", true},
		{"bash", "printf %s {v}", false},
		{"bash", "[ -v {v} ]", true},
		{"bash", "test -v {v}", true},
		{"bash", "declare -n r={v}", true},
		{"bash", "echo ${!{v}}", true},
		{"bash", "echo ${@:{v}}", true},
		{"bash", "x=$(echo {v}); [[ $x -gt 1 ]]", false},
		{"bash", "echo $( [[ {v} -gt 1 ]] )", true},
		{"bash", "[ {v} -gt 5 ]", false},
		{"bash", "test {v} -gt 5", false},
		{"bash", "echo {v} -gt 5", false},
		{"zsh", "[[ {v} -gt 5 ]]", true},
		{"sh", "[[ {v} -gt 5 ]]", true}, // sh may be bash
		{"dash", "[[ {v} -gt 5 ]]", false},
		{"dash", "[ {v} -gt 5 ]", false},
		{"dash", "echo $(( {v} + 1 ))", true},
	} {
		for _, numeric := range []bool{false, true} {
			o := renderOpts{lookup: func(string) (string, bool) { return "", false }, vals: map[string]string{"v": "7"}, mode: modeShell, shell: tt.shell, tool: "t/x", what: "args[1]",
				numeric: map[string]bool{"v": numeric}, tainted: map[string]bool{"v": true}}
			out, _, err := render(tt.tmpl, o)
			want := tt.refused && !numeric
			if (err != nil) != want {
				t.Errorf("%s %q (number %v): %q %v, want refused %v", tt.shell, tt.tmpl, numeric, out, err, want)
			}
			// A number goes into arithmetic bare: quotes are a syntax error there.
			if tt.refused && numeric && (strings.Contains(tt.tmpl, "((") || strings.Contains(tt.tmpl, "${")) && strings.Contains(out, "'7'") {
				t.Errorf("%s %q: the number is quoted: %s", tt.shell, tt.tmpl, out)
			}
			if err != nil && !strings.Contains(err.Error(), "tool t/x, args[1]: {v} sits ") {
				t.Errorf("%s %q: %v", tt.shell, tt.tmpl, err)
			}
		}
	}
}

// TestArithmeticInjection: a chain tool whose bash command line compares a
// string parameter with -gt ran the command in the value (main did); it is
// now refused before anything runs, and the same tool with the parameter
// declared an integer runs.
func TestArithmeticInjection(t *testing.T) {
	rt := func(typ string) string {
		return "executor_id: rex/core/primitives/execute\nconfig:\n  command: /bin/bash\n" +
			"  args: [\"-c\", \"if [[ {n} -gt 5 ]]; then echo big; else echo small; fi\"]\n" +
			"config_schema:\n  type: object\n  properties:\n    n:\n      type: " + typ + "\n"
	}
	proj := project(t, map[string]string{
		".ai/tools/a/str.yaml": rt("string"),
		".ai/tools/a/int.yaml": rt("integer"),
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, nil)
	marker := filepath.Join(proj, "INJECTED")
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "a/str", Params: map[string]string{"n": "a[$(touch " + marker + ")]"}, Target: tgt})
	if err == nil {
		var out bytes.Buffer
		Run(t.Context(), pl, tgt, &out, &out)
		if _, serr := os.Stat(marker); serr == nil {
			t.Fatalf("the value's command ran through [[ -gt ]]: %s", pl.Argv)
		}
		t.Fatalf("a/str was planned: %s", pl.Argv)
	}
	errorContains(t, err, "tool a/str", "{n} sits as an operand of -gt inside [[ ]]", "bash evaluates the value as arithmetic", "type: integer or number")
	pl, err = e.Plan(t.Context(), PlanRequest{ID: "a/int", Params: map[string]string{"n": "7"}, Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code, err := Run(t.Context(), pl, tgt, &out, &out); err != nil || code != 0 || out.String() != "big\n" {
		t.Errorf("a/int: %d %v %q", code, err, out.String())
	}
	if _, err := e.Plan(t.Context(), PlanRequest{ID: "a/int", Params: map[string]string{"n": "a[$(id)]"}, Target: tgt}); err == nil {
		t.Error("a/int took a value that is not an integer")
	}
}

// TestParameterNeverNamesTheProgram: a parameter substituted into the word
// that names the program a shell command runs would choose what runs
// (quoting keeps it one word, and one word is a program name); it is
// refused there, in any shell, and allowed as an argument or an
// assignment's value.
func TestParameterNeverNamesTheProgram(t *testing.T) {
	for _, tt := range []struct {
		tmpl    string
		refused bool
	}{
		{"{v}", true},
		{"{v} -x", true},
		{"echo a; {v} b", true},
		{"echo a | {v}", true},
		{"if {v}; then :; fi", true},
		{"X=1 {v} y", true},
		{"echo $({v} y)", true},
		{"/usr/bin/{v} x", true},
		{"echo {v}", false},
		{"X={v} env", false},
		{"grep --regexp={v} f", false},
		{"echo a | grep -e {v}", false},
		{"echo $(printf %s {v})", false},
	} {
		for _, shell := range []string{"sh", "dash", "bash"} {
			o := renderOpts{lookup: func(string) (string, bool) { return "", false }, vals: map[string]string{"v": "touch"}, mode: modeShell, shell: shell, tool: "t/x", what: "args[1]",
				tainted: map[string]bool{"v": true}}
			out, _, err := render(tt.tmpl, o)
			if (err != nil) != tt.refused {
				t.Errorf("%s %q: %q %v, want refused %v", shell, tt.tmpl, out, err, tt.refused)
			}
			if err != nil && !strings.Contains(err.Error(), "{v} names the program") {
				t.Errorf("%s %q: %v", shell, tt.tmpl, err)
			}
		}
	}
}
