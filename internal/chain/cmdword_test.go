package chain

import (
	"strings"
	"testing"
)

// TestParameterNamesTheProgramAfterAPrefix: TestParameterNeverNamesTheProgram
// refuses a parameter in the word that names the program, and skips the
// words after which a command starts (if, then, !, time...). The shell's
// own "run this" builtins and the usual wrappers put the program (or shell
// code) in a later word: exec/command/nohup/env/sudo {v} run the program
// the value names, and eval {v} / sh -c {v} / . {v} run the value as shell
// code, whatever quotes rex adds. A shell command is read word by word the
// way the argv shape reads an argv (argScanner), so the same wrappers are
// known in both.
func TestParameterNamesTheProgramAfterAPrefix(t *testing.T) {
	for _, tt := range []struct {
		tmpl string
		want string // in the refusal; "" renders
	}{
		// The reviewer's cases.
		{"eval {v}", "{v} is run as shell code by eval"},
		{"exec {v}", "{v} names the program"},
		{"command {v}", "{v} names the program"},
		{"nohup {v} x", "{v} names the program"},
		{"env {v}", "{v} names the program"},
		{"sh -c {v}", "{v} is run as shell code by sh -c"},
		{". {v}", `{v} names the script "." runs as shell code`},
		{"echo a; eval {v}", "{v} is run as shell code by eval"},
		// Other wrappers and code-running builtins.
		{"source {v}", `{v} names the script "source" runs`},
		{"bash -ec {v}", "{v} is run as shell code by bash -c"},
		{"trap {v} EXIT", "{v} is run as shell code by trap"},
		{"builtin {v} x", "{v} names the program"},
		{"builtin eval {v}", "{v} is run as shell code by eval"},
		{"command eval {v}", "{v} is run as shell code by eval"},
		{"nice {v}", "{v} names the program"},
		{"timeout 5 {v}", "{v} names the program"},
		{"sudo {v}", "{v} names the program"},
		{"doas {v}", "{v} names the program"},
		{"xargs {v}", "{v} names the program"},
		{"xargs -n 1 -I % {v} %", "{v} names the program"},
		{"stdbuf -oL {v}", "{v} names the program"},
		{"setsid {v}", "{v} names the program"},
		{"ionice -c 3 {v}", "{v} names the program"},
		{"chrt 10 {v}", "{v} names the program"},
		{"taskset 0x3 {v}", "{v} names the program"},
		{"taskset -c 1,2 {v}", "{v} names the program"},
		{"nohup env sudo {v}", "{v} names the program"},
		{"nohup sh -c {v}", "{v} is run as shell code by sh -c"},
		{"xargs sh -c {v}", "{v} is run as shell code by sh -c"},
		{"echo $(nohup {v})", "{v} names the program"},
		{"if nohup {v}; then :; fi", "{v} names the program"},
		{"nohup /usr/bin/{v}", "{v} names the program"},
		{"sh {v}", "{v} names the program"},
		{"python3 -c {v}", "{v} is program text of python3"},
		{"env -S {v}", "{v} is program text of env"},
		{"sudo -s {v}", "{v} is program text of sudo"},
		// Options between the wrapper and the program.
		{"nohup -- {v}", "{v} names the program"},
		{"env -i {v}", "{v} names the program"},
		{"env -u HOME {v}", "{v} names the program"},
		{"timeout -s KILL 5 {v}", "{v} names the program"},
		{"nice -n 5 {v}", "{v} names the program"},
		{"sudo -u root {v}", "{v} names the program"},
		{"exec -a name {v}", "{v} names the program"},
		{"time -p {v}", "{v} names the program"},
		// Assignments are skipped.
		{"env A=1 {v}", "{v} names the program"},
		{"env A=1 B=2 nohup {v}", "{v} names the program"},
		// Redirections are not words of the command.
		{"nohup >/dev/null 2>&1 {v}", "{v} names the program"},
		{"2>/dev/null {v}", "{v} names the program"},
		{"nohup 2>&1 {v} x", "{v} names the program"},
		{"exec >log {v}", "{v} names the program"},
		// A parameter in an option of a program rex knows.
		{"sudo -u {v} id", "{v} is an option of sudo"},
		{"python3 -c{v}", "{v} is an option of python3"},
		// Ordinary uses still render: an argument after the program is data.
		{"nohup mycmd {v}", ""},
		{"echo {v}", ""},
		{"env A={v} cmd", ""},
		{"env A=1 cmd {v}", ""},
		{"timeout {v} cmd", ""},
		{"sh -c 'fixed script' sh {v}", ""},
		{"bash -c 'echo \"$1\"' bash {v}", ""},
		{"sh script.sh {v}", ""},
		{". ./lib.sh {v}", ""},
		{"trap 'rm -f x' {v}", ""},
		{"trap -p {v}", ""},
		{"command -v {v}", ""},
		{"command -V {v} >/dev/null", ""},
		{"python3 -c 'import sys' {v}", ""},
		{"nohup mycmd > {v}", ""},
		{"nohup mycmd 2> {v} x", ""},
		{"echo x >&2; printf %s {v}", ""},
		{"echo x &> {v}", ""},
		{"xargs -I % cp % {v}", ""},
	} {
		o := renderOpts{lookup: func(string) (string, bool) { return "", false }, vals: map[string]string{"v": "touch /tmp/pwned"}, mode: modeShell, shell: "sh", tool: "t/x", what: "args[1]",
			tainted: map[string]bool{"v": true}}
		out, _, err := render(tt.tmpl, o)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v, want it rendered", tt.tmpl, err)
		case tt.want != "" && err == nil:
			t.Errorf("%q rendered as %q: the parameter's value is what runs, and it was not refused", tt.tmpl, out)
		case err != nil && !strings.Contains(err.Error(), tt.want):
			t.Errorf("%q: %v, want %q", tt.tmpl, err, tt.want)
		case err != nil && strings.Count(err.Error(), ";") != 1:
			t.Errorf("%q: %v: one sentence says what happened and what to do", tt.tmpl, err)
		}
	}
}

// TestWrapperInAShellScript: the argv shape knows the wrappers whose next
// word is the program (argv.go: env, sudo, nohup, timeout, command, exec,
// ...) and refuses a parameter there ("envprog"); the same wrappers inside
// an sh -c script are refused alike.
func TestWrapperInAShellScript(t *testing.T) {
	const p = "  command: /bin/sh\n  args: [-c, "
	runShapes(t, []shapeCase{
		{name: "argvnohup", config: "  command: nohup\n  args: [\"{msg}\"]\n", params: map[string]string{"msg": "touch"}, err: []string{"{msg}", "names the program"}},
		{name: "argvxargs", config: "  command: xargs\n  args: [-n, \"1\", \"{msg}\"]\n", params: map[string]string{"msg": "touch"}, err: []string{"{msg}", "names the program"}},
		{name: "argvtrap", config: "  command: bash\n  args: [-c, \"trap {msg} EXIT\"]\n", params: map[string]string{"msg": "touch x"}, err: []string{"{msg} is run as shell code by trap"}},
		{name: "shexec", config: p + "\"exec {msg}\"]\n", params: map[string]string{"msg": "touch"}, err: []string{"{msg}", "names the program"}},
		{name: "shnohup", config: p + "\"nohup {msg} x\"]\n", params: map[string]string{"msg": "touch"}, err: []string{"{msg}", "names the program"}},
		{name: "sheval", config: p + "\"eval {msg}\"]\n", params: map[string]string{"msg": "touch x"}, err: []string{"{msg}"}},
		{name: "shc", config: p + "\"sh -c 'printf \\\"[%s]\\\\\\\\n\\\" \\\"$1\\\"' sh {msg}\"]\n", want: "[" + pwn + "]\n"},
		{name: "nohuparg", config: p + "\"nohup printf '[%s]\\\\n' {msg} 2>/dev/null\"]\n", want: "[" + pwn + "]\n"},
	})
}
