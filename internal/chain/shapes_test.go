package chain

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The four ways a parameter used to become code (issue 14, item 7), each
// run for real: the plan either refuses with a clear error or the value
// arrives byte for byte, and no PWNED file appears anywhere.

const pwn = "x; touch PWNED"

// rtYAML is a runtime with the given config body (indented two spaces).
func rtYAML(config string) string {
	return "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\nconfig:\n" + config
}

// shapeCase is one template and what must come of it.
type shapeCase struct {
	name   string
	config string            // runtime config lines
	params map[string]string // nil: {"msg": pwn}
	want   string            // exact output when the plan is valid
	err    []string          // parts of the error when it must be refused
}

func runShapes(t *testing.T, cases []shapeCase) {
	t.Helper()
	files := map[string]string{}
	for _, c := range cases {
		files[".ai/tools/s/"+c.name+".yaml"] = rtYAML(c.config)
		files[".ai/tools/t/"+c.name+".yaml"] = "executor_id: s/" + c.name + "\n"
	}
	proj := project(t, files)
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			params := c.params
			if params == nil {
				params = map[string]string{"msg": pwn}
			}
			pl, err := e.Plan(t.Context(), PlanRequest{ID: "t/" + c.name, Params: params, Target: tgt})
			if c.err != nil {
				errorContains(t, err, c.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code, err := Run(t.Context(), pl, tgt, &out, &errb)
			if err != nil || code != 0 {
				t.Fatalf("argv %q stdin %q: exit %d %v: %s", pl.Argv, pl.Stdin, code, err, errb.String())
			}
			if out.String() != c.want {
				t.Errorf("argv %q stdin %q: output %q, want %q", pl.Argv, pl.Stdin, out.String(), c.want)
			}
		})
	}
	noPWNED(t, proj)
}

func noPWNED(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		filepath.Walk(d, func(p string, _ os.FileInfo, err error) error {
			if err == nil && filepath.Base(p) == "PWNED" {
				t.Errorf("a parameter ran as a command: %s exists", p)
			}
			return nil
		})
	}
}

// Shape 1: input_data is the program when the command is a shell or an
// interpreter that reads it from stdin.
func TestTemplateInputDataIsProgramText(t *testing.T) {
	runShapes(t, []shapeCase{
		// sh -s: stdin is a command line; substituted values are quoted.
		{name: "shs", config: "  command: /bin/sh\n  args: [-s]\n  input_data: \"printf '[%s]\\\\n' {msg}\\n\"\n", want: "[" + pwn + "]\n"},
		// sh with no operand reads its commands from stdin too.
		{name: "shbare", config: "  command: /bin/sh\n  input_data: \"printf '[%s]\\\\n' {msg}\\n\"\n", want: "[" + pwn + "]\n"},
		// sh -s -- a b: the operands are positional parameters, stdin the program.
		{name: "shsargs", config: "  command: /bin/sh\n  args: [-s, --, \"{msg}\"]\n  input_data: \"printf '[%s]\\\\n' \\\"$1\\\" {msg}\\n\"\n", want: "[" + pwn + "]\n[" + pwn + "]\n"},
		// through env, as runtimes often start shells.
		{name: "envsh", config: "  command: /usr/bin/env\n  args: [sh]\n  input_data: \"printf '[%s]\\\\n' {msg}\\n\"\n", want: "[" + pwn + "]\n"},
		// The parameters as JSON would be run as a command.
		{name: "shjson", config: "  command: /bin/sh\n  args: [-s]\n  input_data: \"{params_json}\"\n", err: []string{"{params_json}", "sh reads its commands from stdin"}},
		// A here-document in a stdin program is refused like one after -c.
		{name: "shheredoc", config: "  command: sh\n  input_data: \"cat <<EOF\\n{msg}\\nEOF\\n\"\n", err: []string{"{msg}", "here-document"}},
		// An interpreter with no script reads program text from stdin: no
		// parameter may enter it.
		{name: "py", config: "  command: python3\n  input_data: \"print('{msg}')\"\n", err: []string{"{msg} carries a parameter into program text", "python3 reads its program from stdin"}},
		{name: "pydash", config: "  command: python3\n  args: [-u, \"-\"]\n  input_data: \"print('{msg}')\"\n", err: []string{"program text"}},
		{name: "pyjson", config: "  command: python3\n  input_data: \"{params_json}\"\n", err: []string{"{params_json}", "python3 reads its program from stdin"}},
		// With a script, stdin is data again and carries the JSON.
		{name: "pyscript", config: "  command: python3\n  args: [-c, \"import sys; print(sys.stdin.read())\"]\n  input_data: \"{params_json}\"\n", want: `{"msg":"` + pwn + `"}` + "\n"},
		{name: "shscript", config: "  command: sh\n  args: [-c, \"cat\"]\n  input_data: \"{msg}\"\n", want: pwn},
	})
}

// Shape 2: the command line of a shell is the first operand after its
// options, wherever -c sits and whatever follows it.
func TestTemplateShellDashDash(t *testing.T) {
	const p = "  command: /bin/sh\n  args: "
	runShapes(t, []shapeCase{
		{name: "ccdd", config: p + "[-c, --, \"printf '[%s]\\\\n' {msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "cthene", config: p + "[-c, -e, \"printf '[%s]\\\\n' {msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "ethenc", config: p + "[-e, -c, \"printf '[%s]\\\\n' {msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "cluster", config: p + "[-ec, \"printf '[%s]\\\\n' {msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "bashopt", config: "  command: bash\n  args: [-o, pipefail, -c, \"printf '[%s]\\\\n' {msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "bashlong", config: "  command: bash\n  args: [--norc, -c, \"printf '[%s]\\\\n' {msg}\", bash, \"{msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "dash", config: p + "[-c, \"printf '[%s]\\\\n' \\\"$1\\\"\", sh, \"{msg}\"]\n", want: "[" + pwn + "]\n"},
		// A parameter may not be an option of the shell, nor its script.
		{name: "optparam", config: p + "[\"{msg}\", -c, \"true\"]\n", params: map[string]string{"msg": "-c"}, err: []string{"{msg}", "option of sh"}},
		{name: "script", config: p + "[\"{msg}\"]\n", err: []string{"{msg}", "names the program or script"}},
		// The program itself cannot come from a parameter.
		{name: "argv0", config: "  command: \"{msg}\"\n", params: map[string]string{"msg": "/usr/bin/touch"}, err: []string{"{msg}", "names the program"}},
		{name: "envprog", config: "  command: env\n  args: [\"A=1\", \"{msg}\"]\n", params: map[string]string{"msg": "touch"}, err: []string{"{msg}", "names the program"}},
		// python -c -- is program text for python, then data.
		{name: "pyc", config: "  command: python3\n  args: [-c, \"import sys; print(sys.argv[1:])\", --, \"{msg}\"]\n", want: "['--', '" + pwn + "']\n"},
		{name: "pycode", config: "  command: python3\n  args: [-B, -c, \"print('{msg}')\"]\n", err: []string{"program text"}},
		{name: "awk", config: "  command: awk\n  args: [\"BEGIN { print \\\"{msg}\\\" }\"]\n", err: []string{"program text"}},
		{name: "awkdata", config: "  command: awk\n  args: [\"BEGIN { print ARGV[1] }\", \"{msg}\"]\n", want: pwn + "\n"},
	})
}

// Shape 3: inside a here-document (and in the other places where a
// single-quoted word is not one word: comments, backquotes, quotes nested
// in a command substitution) a placeholder is refused.
func TestTemplateHereDocument(t *testing.T) {
	const p = "  command: /bin/sh\n  args: [-c, "
	runShapes(t, []shapeCase{
		{name: "heredoc", config: p + "\"cat <<EOF\\n{msg}\\nEOF\"]\n", err: []string{"{msg}", "here-document", "\"$1\""}},
		{name: "heredocq", config: p + "\"cat <<'EOF'\\nx {msg}\\nEOF\"]\n", err: []string{"here-document"}},
		{name: "heredocdash", config: p + "\"cat <<-EOF\\n\\t{msg}\\n\\tEOF\"]\n", err: []string{"here-document"}},
		{name: "twoheredocs", config: p + "\"cat <<A; cat <<B\\na\\nA\\n{msg}\\nB\"]\n", err: []string{"here-document"}},
		// After the here-document ends, values are words again.
		{name: "afterheredoc", config: p + "\"cat <<EOF\\nbody\\nEOF\\nprintf '[%s]\\\\n' {msg}\"]\n", want: "body\n[" + pwn + "]\n"},
		// A here-string is a word like any other.
		{name: "herestring", config: "  command: bash\n  args: [-c, \"cat <<< {msg}\"]\n", want: pwn + "\n"},
		// A shift is not a here-document.
		{name: "shift", config: p + "\"echo $((1 << 2)); printf '[%s]\\\\n' {msg}\"]\n", want: "4\n[" + pwn + "]\n"},
		{name: "comment", config: p + "\"echo hi # {msg}\"]\n", params: map[string]string{"msg": "x\ntouch PWNED"}, err: []string{"{msg}", "comment"}},
		{name: "notcomment", config: p + "\"printf '[%s]\\\\n' a#{msg}\"]\n", want: "[a#" + pwn + "]\n"},
		{name: "backquote", config: p + "\"echo `echo {msg}`\"]\n", params: map[string]string{"msg": "`touch PWNED`"}, err: []string{"{msg}", "backquotes"}},
		{name: "nested", config: p + "\"echo \\\"$(printf %s \\\"{msg}\\\")\\\"\"]\n", params: map[string]string{"msg": "'$(touch PWNED)'"}, err: []string{"{msg}", "inside quotes"}},
		// Inside $( ) within double quotes, quoting starts afresh.
		{name: "subst", config: p + "\"echo \\\"$(printf '[%s]' {msg})\\\"\"]\n", want: "[" + pwn + "]\n"},
		{name: "substok", config: p + "\"echo $(printf '[%s]' {msg})\"]\n", params: map[string]string{"msg": "a b"}, want: "[a b]\n"},
		{name: "ansi", config: "  command: bash\n  args: [-c, \"echo $'a\\\\' {msg}'\"]\n", err: []string{"inside quotes"}},
		{name: "arith", config: p + "\"echo $(( {msg} + 1 ))\"]\n", params: map[string]string{"msg": "1"}, err: []string{"{msg}", "arithmetic"}},
	})
}

// Shape 4: a parameter named like a config key never replaces it; it
// stays in params_json.
func TestTemplateParamCannotOverrideConfig(t *testing.T) {
	runShapes(t, []shapeCase{
		{name: "runner", config: "  command: \"{runner}\"\n  runner: /bin/echo\n  args: [hello]\n",
			params: map[string]string{"runner": "/usr/bin/touch"}, want: "hello\n"},
		{name: "greeting", config: "  command: /bin/sh\n  args: [-c, \"printf '%s\\\\n' {greeting} {msg}\"]\n  greeting: hi\n",
			params: map[string]string{"greeting": "$(touch PWNED)", "msg": "m"}, want: "hi\nm\n"},
		{name: "stdin", config: "  command: cat\n  input_data: \"{params_json}\"\n  greeting: hi\n",
			params: map[string]string{"greeting": "evil"}, want: `{"greeting":"evil"}`},
	})
	// The trace says which parameters were kept out.
	proj := project(t, map[string]string{
		".ai/tools/s/r.yaml": rtYAML("  command: \"{runner}\"\n  runner: /bin/echo\n"),
		".ai/tools/t/r.yaml": "executor_id: s/r\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "t/r", Params: map[string]string{"runner": "x"}, Target: localTarget(t, nil), Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(pl.Trace.String(), "keys: runner named like config keys") {
		t.Errorf("trace does not name the parameter kept out:\n%s", pl.Trace)
	}
}

// FuzzShellTemplate renders author templates holding a parameter in shell
// mode: it must never panic, and wherever it accepts the placeholder the
// value appears only in single quotes.
func FuzzShellTemplate(f *testing.F) {
	for _, s := range []string{
		"printf '%s' {msg}", "cat <<EOF\n{msg}\nEOF", "echo \"$(x {msg})\"", "a # {msg}\n{msg}",
		"$(( {msg} ))", "`{msg}`", "$'{msg}'", "cat <<-'E' <<F\n\tE\n{msg}\nF\n{msg}", "x=$({msg}) # c",
		"if [[ {msg} -gt 5 ]]; then :; fi", "echo ${a[{msg}]} ${x:-{msg}}", "declare -i n={msg}", "(( {msg} ))", "[[ -v a[{msg}] ]]",
	} {
		f.Add(s, "v'; touch PWNED")
	}
	f.Fuzz(func(t *testing.T, tmpl, v string) {
		o := renderOpts{lookup: func(string) (string, bool) { return "", false }, vals: map[string]string{"msg": v},
			tainted: map[string]bool{"msg": true}, mode: modeShell, what: "fuzz"}
		out, _, used, err := renderTaint(tmpl, o)
		if err != nil || len(used) == 0 {
			return
		}
		if !strings.Contains(out, shellQuote(v)) {
			t.Fatalf("%q with %q rendered %q: the value is not single-quoted", tmpl, v, out)
		}
	})
}

// FuzzArgScanner reads arbitrary argvs: it must not panic, argv[0] is
// always the program, and a shell command line only ever follows a shell's
// -c.
func FuzzArgScanner(f *testing.F) {
	f.Add("sh\x00-c\x00--\x00x")
	f.Add("env\x00A=1\x00python3\x00-Bc\x00x\x00-")
	f.Add("sudo\x00-s\x00x")
	f.Add("deno\x00eval\x00x")
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		var a argScanner
		for i, x := range args {
			r := a.next(x)
			if i == 0 && r != roleProgram {
				t.Fatalf("argv[0] of %q has role %d", args, r)
			}
			if r == roleShell && !(a.fam == famShell && a.shellC) {
				t.Fatalf("argument %d of %q is a command line, but no shell -c precedes it", i, args)
			}
		}
		if a.stdin() == stdinShell && a.fam != famShell {
			t.Fatalf("%q: stdin is a command line but %s is not a shell", args, a.prog)
		}
	})
}
