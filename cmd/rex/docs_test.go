package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompletionLoadsInBash: the bash completion script loads and
// registers rex, as the one-liner checks; zsh and fish scripts are
// produced too.
func TestCompletionLoadsInBash(t *testing.T) {
	e := newRexEnv(t, rexBin)
	cmd := exec.Command("bash", "-c", "source <(rex completion bash); complete -p rex")
	cmd.Env = append(e.env, "PATH="+filepath.Dir(rexBin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "-F __start_rex rex") {
		t.Fatalf("bash completion: %v\n%s", err, out)
	}
	for shell, want := range map[string]string{"zsh": "#compdef rex", "fish": "complete -c rex", "bash": "__start_rex()"} {
		out, errOut, code := e.run("completion", shell)
		if code != 0 || !strings.Contains(out, want) || errOut != "" {
			t.Errorf("completion %s: exit %d, lacks %q", shell, code, want)
		}
	}
}

// TestDynamicCompletion: TARGETS complete from the registry (devices,
// groups, all, local, after a comma too); tool ids and import kinds too.
func TestDynamicCompletion(t *testing.T) {
	e := newRexEnv(t, rexBin)
	for _, args := range [][]string{{"device", "add", "web1", "h1.lan"}, {"device", "add", "web2", "h2.lan"}, {"device", "add", "db1", "db.lan"},
		{"device", "group", "create", "web"}, {"device", "group", "add", "web", "web1", "web2"}} {
		if _, errOut, code := e.run(args...); code != 0 {
			t.Fatalf("%v: %s", args, errOut)
		}
	}
	complete := func(args ...string) []string {
		out, errOut, code := e.run(append([]string{"__complete"}, args...)...)
		if code != 0 {
			t.Fatalf("__complete %v: exit %d %s", args, code, errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[:len(lines)-1] // the last line is cobra's directive
	}
	if got := strings.Join(complete("run", "we"), " "); got != "web1 web2 web" {
		t.Errorf("run we<tab> = %q", got)
	}
	if got := strings.Join(complete("run", "web1,d"), " "); got != "web1,db1" {
		t.Errorf("run web1,d<tab> = %q", got)
	}
	if got := complete("run", ""); len(got) != 6 {
		t.Errorf("run <tab> = %q, want all, local, 3 devices and a group", got)
	}
	if got := complete("run", "web1", ""); len(got) != 0 {
		t.Errorf("after TARGETS the command is not a target: %q", got)
	}
	if got := strings.Join(complete("run", "-x", "web"), " "); got != "web1 web2 web" {
		t.Errorf("run -x web<tab> = %q", got)
	}
	if got := strings.Join(complete("tool", "run", "x", "--target", "d"), " "); got != "db1" {
		t.Errorf("tool run --target d<tab> = %q", got)
	}
	if got := strings.Join(complete("device", "import", ""), " "); !strings.Contains(got, "ansible") || !strings.Contains(got, "ssh-config") {
		t.Errorf("device import <tab> = %q", got)
	}
}

// TestManPage: rex man renders with man -l, without a groff warning, and
// says what operators look for.
func TestManPage(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Fatal("man is required (apt-get install man-db groff-base)")
	}
	e := newRexEnv(t, rexBin)
	page, errOut, code := e.run("man")
	if code != 0 || errOut != "" || !strings.HasPrefix(page, ".TH REX 1") {
		t.Fatalf("rex man: exit %d %q", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "rex.1")
	os.WriteFile(file, []byte(page), 0o644)
	cmd := exec.Command("man", "--warnings", "-l", file)
	cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=100", "LANG=C.UTF-8")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l: %v\n%s", err, stderr.String())
	}
	text := out.String()
	for _, want := range []string{"NAME", "rex - a console", "SYNOPSIS", "rex run TARGETS [flags] -- CMD [ARG...]",
		"-x, --exclude NAMES", "--max-fail N|P%", "rex device import ansible INVENTORY", "TARGETS", "continuation mark",
		"EXIT STATUS", "exits 130", "REX_TARGET", "SEE ALSO"} {
		if !strings.Contains(text, want) {
			t.Errorf("the man page lacks %q", want)
		}
	}
}
