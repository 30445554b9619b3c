package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestToolsOnLocalAndSSH runs a bash tool and a Python tool (in the seed's
// function format) with parameters on local and two loopback sshd hosts:
// the files travel through the CAS, output streams back per host, exit
// codes come through.
func TestToolsOnLocalAndSSH(t *testing.T) {
	f := newSSHFleet(t, 2, false)
	project := filepath.Join(f.home, "proj")
	tools := filepath.Join(project, ".ai", "tools", "ops")
	os.MkdirAll(tools, 0o755)
	os.WriteFile(filepath.Join(tools, "greet.py"), []byte(`"""Greet someone."""
__executor_id__ = "rex/core/runtimes/python/function"
__version__ = "1.0.0"
CONFIG_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "times": {"type": "integer"}}}

def execute(params, project_path):
    import os
    for _ in range(params.get("times", 1)):
        print("hello", params["name"], "from", os.environ.get("HOME"))
    return {"success": True}
`), 0o644)
	os.WriteFile(filepath.Join(tools, "check.sh"), []byte(`#!/bin/bash
# rex: executor_id: rex/core/runtimes/bash/bash
# rex: version: "1.0.0"
# rex: description: exit with the given code
echo "code=$REX_PARAM_CODE home=$HOME"
exit "$REX_PARAM_CODE"
`), 0o755)

	run := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		cmd := f.cmd(args...)
		cmd.Dir = project
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return out.String(), errOut.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), errOut.String(), 0
	}
	// Host names are padded to one width; compare without the padding.
	pad := regexp.MustCompile(`^(\S+?)([:!]) +`)
	sorted := func(s string) []string {
		l := strings.Split(strings.TrimSpace(s), "\n")
		for i := range l {
			l[i] = pad.ReplaceAllString(l[i], "$1$2 ")
		}
		sort.Strings(l)
		return l
	}

	hostile := `$(touch PWNED); 'x' "y" *`
	out, errOut, code := run("tool", "run", "ops/greet", "--param", "name="+hostile, "--param", "times=2", "--target", "local,h1,h2")
	if code != 0 {
		t.Fatalf("greet: exit %d\n%s\n%s", code, out, errOut)
	}
	want := []string{
		"h1: hello " + hostile + " from " + f.hostHome("h1"),
		"h1: hello " + hostile + " from " + f.hostHome("h1"),
		"h1: {\"success\": true}",
		"h2: hello " + hostile + " from " + f.hostHome("h2"),
		"h2: hello " + hostile + " from " + f.hostHome("h2"),
		"h2: {\"success\": true}",
		"local: hello " + hostile + " from " + f.home,
		"local: hello " + hostile + " from " + f.home,
		"local: {\"success\": true}",
	}
	sort.Strings(want)
	got := sorted(out)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("greet output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, dir := range []string{project, f.hostHome("h1"), f.hostHome("h2")} {
		if _, err := os.Stat(filepath.Join(dir, "PWNED")); err == nil {
			t.Errorf("a parameter ran as a command in %s", dir)
		}
	}

	out, errOut, code = run("tool", "run", "ops/check", "--param", "code=7", "--target", "h1,h2")
	if code != 7 {
		t.Fatalf("check: exit %d, want 7\n%s\n%s", code, out, errOut)
	}
	want = []string{"h1: code=7 home=" + f.hostHome("h1"), "h2: code=7 home=" + f.hostHome("h2")}
	if strings.Join(sorted(out), "\n") != strings.Join(want, "\n") {
		t.Errorf("check output %q", out)
	}
	// A second run ships nothing new and still works.
	if out, _, code := run("tool", "run", "ops/check", "--param", "code=0", "--target", "h1"); code != 0 || !strings.Contains(out, "code=0") {
		t.Errorf("second run: %d %q", code, out)
	}
}
