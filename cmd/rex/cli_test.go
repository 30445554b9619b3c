package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandPaths walks the whole command tree, cobra's help and completion
// commands included, and returns every command's words after "rex".
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	root := newRoot(newEnv(strings.NewReader(""), io.Discard, io.Discard))
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(root, nil)
	return paths
}

// TestHelpEveryCommand runs `--help` (and `-h`) on every command of the
// real binary: exit 0, the command's usage on stdout, nothing on stderr,
// no line ending in blanks (stdout is a pipe here). Every command of rex's
// own has examples.
func TestHelpEveryCommand(t *testing.T) {
	e := newRexEnv(t, rexBin)
	paths := commandPaths(t)
	if len(paths) < 20 {
		t.Fatalf("the tree has %d commands; the walk is broken", len(paths))
	}
	root := newRoot(newEnv(strings.NewReader(""), io.Discard, io.Discard))
	for _, p := range paths {
		for _, flag := range []string{"--help", "-h"} {
			args := append(append([]string(nil), p...), flag)
			out, errOut, code := e.run(args...)
			if code != 0 || errOut != "" {
				t.Errorf("rex %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
				continue
			}
			if !strings.Contains(out, "USAGE") || !strings.Contains(out, "rex") {
				t.Errorf("rex %s printed no usage:\n%s", strings.Join(args, " "), out)
			}
			if n := strings.Count(out, " \n"); n > 0 {
				t.Errorf("rex %s: %d lines end in blanks:\n%s", strings.Join(args, " "), n, strings.ReplaceAll(out, " \n", "·\n"))
			}
		}
		c, _, err := root.Find(p)
		if err != nil || c == nil {
			continue // cobra's own help and completion commands
		}
		if c.Example == "" {
			t.Errorf("rex %s has no examples", strings.Join(p, " "))
		}
	}
	// Help asked for after the positionals, the way operators edit a line.
	for _, args := range [][]string{
		{"run", "h1", "--help"},
		{"run", "h1", "-h", "--", "true"},
		{"attach", "h1", "--help"},
		{"device", "add", "x", "--help"},
		{"help", "run"},
	} {
		out, errOut, code := e.run(args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "USAGE") {
			t.Errorf("rex %s: exit %d, stderr %q, stdout:\n%s", strings.Join(args, " "), code, errOut, out)
		}
	}
}

// TestUsageErrors: a mistake in how rex was called exits 2 with one line
// that names it, and never reaches a host.
func TestUsageErrors(t *testing.T) {
	e := newRexEnv(t, rexBin)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for rex`},
		{[]string{"devcie"}, "did you mean device?"},
		{[]string{"device", "bogus"}, `unknown command "bogus" for rex device`},
		{[]string{"device", "group", "craete"}, "did you mean create?"},
		{[]string{"run", "h1", "--bogus", "--", "true"}, "unknown flag --bogus for rex run"},
		{[]string{"run", "--timout", "1", "h1", "--", "true"}, "did you mean --timeout?"},
		{[]string{"run", "h1"}, "no command to run"},
		{[]string{"run"}, "which targets?"},
		{[]string{"run", "h1", "--timeout", "soon", "--", "true"}, `--timeout "soon"`},
		{[]string{"run", "h1", "--json=maybe", "--", "true"}, "takes true or false"},
		{[]string{"tool", "run"}, "which tool?"},
		{[]string{"device", "add", "x"}, "takes NAME and [USER@]HOST"},
		{[]string{"device", "add", "x", "h", "--port", "0"}, "from 1 to 65535"},
		{[]string{"attach"}, "which target?"},
		{[]string{"push", "a", "b"}, "usage: rex push"},
		{[]string{"version", "extra"}, "rex version: "},
		{[]string{"device", "import", "ssh-config", "a", "b"}, "accepts at most 1 arg"},
		{[]string{"run", "h1", "--max-fail", "0", "--", "true"}, `--max-fail "0"`},
		{[]string{"run", "h1", "--outdir", "d", "--json", "--", "true"}, "--outdir writes the output to files"},
	}
	for _, tt := range tests {
		out, errOut, code := e.run(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) || out != "" {
			t.Errorf("rex %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
		if n := strings.Count(strings.TrimSpace(errOut), "\n"); n > 0 {
			t.Errorf("rex %s: %d lines on stderr, want one:\n%s", strings.Join(tt.args, " "), n+1, errOut)
		}
	}
}

// TestBooleanFlagsTakeFalse: --json=false is off, not on.
func TestBooleanFlagsTakeFalse(t *testing.T) {
	e := newRexEnv(t, rexBin)
	if _, errOut, code := e.run("device", "add", "web1", "h.lan"); code != 0 {
		t.Fatalf("device add: %d %s", code, errOut)
	}
	out, _, code := e.run("device", "list", "--json=false")
	if code != 0 || strings.HasPrefix(out, "{") || !strings.Contains(out, "web1") {
		t.Errorf("device list --json=false: exit %d:\n%s", code, out)
	}
	out, _, code = e.run("device", "list", "--json=true")
	if code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("device list --json=true: exit %d:\n%s", code, out)
	}
	out, errOut, code := e.run("run", "local", "--json=false", "--", "echo", "hi")
	if code != 0 || out != "local: hi\n" {
		t.Errorf("run --json=false: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestTrimLines: the blanks that end a line are dropped, wherever the
// writes split the line; blanks inside a line stay.
func TestTrimLines(t *testing.T) {
	for _, tt := range []struct {
		writes []string
		want   string
	}{
		{[]string{"a  b   \n"}, "a  b\n"},
		{[]string{"a ", " ", "\n", "  b"}, "a\n  b"},
		{[]string{"a  ", "  b \n  \n"}, "a    b\n\n"},
		{[]string{"no newline   "}, "no newline"},
		{[]string{"\t x\t \n"}, "\t x\t\n"},
	} {
		var b strings.Builder
		tw := &trimLines{w: &b}
		for _, w := range tt.writes {
			if n, err := tw.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", w, n, err)
			}
		}
		if b.String() != tt.want {
			t.Errorf("%q written: %q, want %q", tt.writes, b.String(), tt.want)
		}
	}
}

func TestVersion(t *testing.T) {
	e := newRexEnv(t, rexBin)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, _, code := e.run(args...)
		if code != 0 || !strings.HasPrefix(out, "rex ") || strings.Count(out, "\n") != 1 {
			t.Errorf("rex %s: exit %d %q", strings.Join(args, " "), code, out)
		}
	}
}

// TestFlagsMeanOneThing: across the whole tree a letter always stands for
// the same flag, and a flag name always takes the same kind of value.
func TestFlagsMeanOneThing(t *testing.T) {
	root := newRoot(newEnv(strings.NewReader(""), io.Discard, io.Discard))
	letters := map[string]string{} // shorthand → name
	types := map[string]string{}   // name → value type
	where := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Shorthand != "" {
				if prev, ok := letters[f.Shorthand]; ok && prev != f.Name {
					t.Errorf("-%s is --%s in %s but --%s in %s", f.Shorthand, prev, where["-"+f.Shorthand], f.Name, c.CommandPath())
				}
				letters[f.Shorthand], where["-"+f.Shorthand] = f.Name, c.CommandPath()
			}
			if prev, ok := types[f.Name]; ok && prev != f.Value.Type() {
				t.Errorf("--%s takes a %s in %s but a %s in %s", f.Name, prev, where[f.Name], f.Value.Type(), c.CommandPath())
			}
			types[f.Name], where[f.Name] = f.Value.Type(), c.CommandPath()
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for letter, name := range map[string]string{"w": "target", "x": "exclude", "t": "timeout", "f": "concurrency", "q": "quiet"} {
		if letters[letter] != name {
			t.Errorf("-%s is %q, want --%s", letter, letters[letter], name)
		}
	}
}
