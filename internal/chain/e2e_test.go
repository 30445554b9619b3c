package chain

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const bashTool = `#!/usr/bin/env bash
# rex: executor_id: rex/core/runtimes/bash/bash
# rex: version: "1.0.0"
# rex: description: Greets someone and exits with the code asked for
# rex: config_schema:
# rex:   properties:
# rex:     name: {type: string}
# rex:     code: {type: integer, default: 0}
# rex:   required: [name]
set -eu
echo "hello $REX_PARAM_NAME from $(basename "$1")"
echo "stdin: $(cat)"
echo "to stderr" >&2
exit "$REX_PARAM_CODE"
`

// seedTool is a tool in the seed's format, unchanged apart from the prefix.
const seedTool = `"""A greeting tool."""

__version__ = "1.0.0"
__tool_type__ = "python"
__executor_id__ = "rex/core/runtimes/python/function"
__category__ = "my/greet"
__tool_description__ = "Example Python tool"

CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Name to greet"}
    },
    "required": ["name"]
}

from helper import suffix


def execute(params: dict, project_path: str) -> dict:
    if params["name"] == "fail":
        return {"success": False, "error": "asked to fail"}
    return {"success": True, "message": f"Hello {params['name']}{suffix()}", "project": project_path}
`

const scriptTool = `import argparse, json, sys
__executor_id__ = "rex/core/runtimes/python/script"
__version__ = "1.0.0"
CONFIG_SCHEMA = {"properties": {"n": {"type": "integer"}}}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--project-path")
    args = ap.parse_args()
    params = json.load(sys.stdin)
    print("script", params["n"] * 2, args.project_path)
    sys.exit(params["n"])
`

const nodeTool = `#!/usr/bin/env node
// rex: executor_id: rex/core/runtimes/node/node
// rex: version: "1.0.0"
let data = "";
process.stdin.on("data", (c) => (data += c));
process.stdin.on("end", () => {
  const p = JSON.parse(data);
  console.log("node says " + p.word + " in " + process.cwd());
  process.exit(p.word === "bye" ? 4 : 0);
});
`

// A custom runtime in project space: Python through a project runtime that
// passes the tool path and a greeting taken from its own config.
const customRuntime = `version: "1.0.0"
tool_type: runtime
executor_id: rex/core/primitives/execute
description: custom project runtime
env_config:
  interpreter:
    type: system_binary
    binary: python3
    var: MY_PY
  env:
    MY_GREETING: "custom ${MY_PY:+x}"
config:
  command: "${MY_PY}"
  args: ["-c", "import json,sys; p=json.load(sys.stdin); print(sys.argv[1], p['who'], sys.argv[2])", "{banner}", "{tool_id}"]
  banner: "[{tool_id}]"
  input_data: "{params_json}"
`

func e2eProject(t *testing.T) string {
	return project(t, map[string]string{
		".ai/tools/e2e/greet.sh":             bashTool,
		".ai/tools/e2e/pkg/greet.py":         seedTool,
		".ai/tools/e2e/pkg/helper.py":        "def suffix():\n    return '!'\n",
		".ai/tools/e2e/pkg/__init__.py":      "",
		".ai/tools/e2e/script.py":            scriptTool,
		".ai/tools/e2e/hello.js":             nodeTool,
		".ai/tools/e2e/nodepkg/hello.js":     nodeTool,
		".ai/tools/e2e/nodepkg/package.json": "{}\n",
		".ai/tools/e2e/custom.py":            "__executor_id__ = 'my/runtimes/py'\n",
		".ai/tools/my/runtimes/py.yaml":      customRuntime,
		".ai/tools/e2e/stream.sh":            "# rex: executor_id: rex/core/runtimes/bash/bash\necho ready\nwhile [ ! -e \"$1/go\" ]; do sleep 0.01; done\necho done\n",
		".ai/tools/e2e/slow.sh":              "# rex: executor_id: e2e/fast-runtime\nsleep 30\n",
		".ai/tools/e2e/fast-runtime.yaml":    "tool_type: runtime\nexecutor_id: rex/core/runtimes/bash/bash\nconfig: {timeout: 0.5}\n",
	})
}

func TestEndToEndLocal(t *testing.T) {
	proj := e2eProject(t)
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, nil)
	tests := []struct {
		id       string
		params   map[string]string
		code     int
		stdout   string
		stderr   string
		planErrs []string
	}{
		{"e2e/greet", map[string]string{"name": "Ada Lovelace"}, 0,
			"hello Ada Lovelace from " + filepath.Base(proj) + "\nstdin: {\"code\":0,\"name\":\"Ada Lovelace\"}\n", "to stderr\n", nil},
		{"e2e/greet", map[string]string{"name": "x", "code": "7"}, 7,
			"hello x from " + filepath.Base(proj) + "\nstdin: {\"code\":7,\"name\":\"x\"}\n", "to stderr\n", nil},
		{"e2e/greet", nil, 0, "", "", []string{"needs parameter name"}},
		{"e2e/pkg/greet", map[string]string{"name": "Alice"}, 0,
			`{"success": true, "message": "Hello Alice!", "project": "` + proj + `"}` + "\n", "", nil},
		{"e2e/pkg/greet", map[string]string{"name": "fail"}, 1,
			`{"success": false, "error": "asked to fail"}` + "\n", "", nil},
		{"e2e/script", map[string]string{"n": "3"}, 3, "script 6 " + proj + "\n", "", nil},
		{"e2e/hello.js", nil, 0, "", "", []string{"tool e2e/hello.js not found"}},
		{"e2e/hello", map[string]string{"word": "hi"}, 0, "node says hi in " + proj + "\n", "", nil},
		{"e2e/hello", map[string]string{"word": "bye"}, 4, "node says bye in " + proj + "\n", "", nil},
		// With a package.json the anchor is active and the tool runs in it.
		{"e2e/nodepkg/hello", map[string]string{"word": "pkg"}, 0, "node says pkg in " + filepath.Join(proj, ".ai/tools/e2e/nodepkg") + "\n", "", nil},
		{"e2e/custom", map[string]string{"who": "operator"}, 0, "[e2e/custom] operator e2e/custom\n", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			pl, err := e.Plan(t.Context(), PlanRequest{ID: tt.id, Params: tt.params, Target: tgt})
			if tt.planErrs != nil {
				errorContains(t, err, tt.planErrs...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			code, err := Run(t.Context(), pl, tgt, &stdout, &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Fatalf("exit %d, stdout %q, stderr %q\nwant %d, %q, %q", code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
		})
	}
	// The Python runtimes must not litter the project with bytecode.
	if _, err := os.Stat(filepath.Join(proj, ".ai/tools/e2e/pkg/__pycache__")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("__pycache__ written into the project: %v", err)
	}
}

// signalWriter reports when its content first contains a word.
type signalWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	word string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if strings.Contains(w.buf.String(), w.word) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(b), nil
}

// Output reaches the writer while the tool still runs: the tool waits for a
// file the test creates only after it has seen the first line.
func TestOutputIsStreamed(t *testing.T) {
	proj := e2eProject(t)
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, nil)
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "e2e/stream", Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	w := &signalWriter{word: "ready", seen: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := Run(t.Context(), pl, tgt, w, w)
		done <- err
	}()
	select {
	case <-w.seen:
	case err := <-done:
		t.Fatalf("the tool ended before its first line was streamed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no output streamed within 20s")
	}
	if err := os.WriteFile(filepath.Join(proj, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the tool did not finish")
	}
	if w.buf.String() != "ready\ndone\n" {
		t.Fatalf("output %q", w.buf.String())
	}
}

func TestTimeout(t *testing.T) {
	proj := e2eProject(t)
	tgt := localTarget(t, nil)
	pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "e2e/slow", Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	if pl.Timeout != 500*time.Millisecond {
		t.Fatalf("timeout %v", pl.Timeout)
	}
	start := time.Now()
	code, err := Run(t.Context(), pl, tgt, nil, nil)
	if code != 124 || err == nil || !strings.Contains(err.Error(), "did not finish within 500ms") {
		t.Fatalf("got %d %v", code, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v: the process group was not stopped", d)
	}
}

// TestRemoteLayout plans for a TargetRoot, ships the plan's files there
// (what the CAS does for a remote target) and runs the plan from that copy.
func TestRemoteLayout(t *testing.T) {
	proj := e2eProject(t)
	e := newEngine(t, Options{ProjectRoot: proj})
	remote := t.TempDir() // stands for the target's directory
	tgt := localTarget(t, nil)
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "e2e/pkg/greet", Params: map[string]string{"name": "Remote"}, Target: tgt, TargetRoot: remote})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, f := range pl.Files {
		roles = append(roles, f.Role+":"+f.Rel)
		if f.Target != path.Join(remote, f.Rel) {
			t.Errorf("%s: target %s is not under the target root", f.Rel, f.Target)
		}
		if !filepath.IsAbs(f.Local) || len(f.SHA256) != 64 {
			t.Errorf("%+v: local path or hash missing", f)
		}
	}
	want := []string{
		"tool:project/.ai/tools/e2e/pkg/greet.py",
		"runtime:system/.ai/tools/rex/core/runtimes/python/function_shim.py",
		"dependency:project/.ai/tools/e2e/pkg/__init__.py",
		"dependency:project/.ai/tools/e2e/pkg/helper.py",
	}
	if strings.Join(roles, " ") != strings.Join(want, " ") {
		t.Fatalf("files:\n%s\nwant\n%s", strings.Join(roles, "\n"), strings.Join(want, "\n"))
	}
	for _, a := range pl.Argv[1:] {
		if strings.HasPrefix(a, proj) {
			t.Errorf("argument %q still points at the local project", a)
		}
	}
	if pl.Cwd != path.Join(remote, "project") || pl.Env["PYTHONPATH"] != path.Join(remote, "project/.ai/tools/e2e/pkg")+":"+path.Join(remote, "project/.ai/tools/e2e/pkg/lib") {
		t.Errorf("cwd %s PYTHONPATH %s", pl.Cwd, pl.Env["PYTHONPATH"])
	}
	// Ship.
	for _, f := range pl.Files {
		b, err := os.ReadFile(f.Local)
		if err != nil {
			t.Fatal(err)
		}
		if sha256Hex(b) != f.SHA256 {
			t.Fatalf("%s changed since planning", f.Local)
		}
		writeTree(t, remote, map[string]string{f.Rel: string(b)})
	}
	// Move the local project away so only the shipped copy can answer.
	if err := os.Rename(proj, proj+".gone"); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(proj+".gone", proj)
	var out, errb bytes.Buffer
	code, err := Run(t.Context(), pl, tgt, &out, &errb)
	if err != nil || code != 0 {
		t.Fatalf("%d %v %s", code, err, errb.String())
	}
	if want := `{"success": true, "message": "Hello Remote!", "project": "` + remote + `/project"}` + "\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
}

func TestSystemSpaceMaterialization(t *testing.T) {
	proj := e2eProject(t)
	sysDir := t.TempDir()
	e := newEngine(t, Options{ProjectRoot: proj, SystemDir: sysDir})
	tgt := localTarget(t, nil)
	// Concurrent plans write the system space once and agree on it.
	var wg sync.WaitGroup
	shims := make([]string, 8)
	errs := make([]error, 8)
	for i := range shims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pl, err := e.Plan(context.Background(), PlanRequest{ID: "e2e/pkg/greet", Params: map[string]string{"name": "x"}, Target: tgt})
			errs[i] = err
			if err == nil {
				shims[i] = pl.Argv[1]
			}
		}()
	}
	wg.Wait()
	for i := range shims {
		if errs[i] != nil || shims[i] != shims[0] {
			t.Fatalf("plan %d: %v %q vs %q", i, errs[i], shims[i], shims[0])
		}
	}
	entries, _ := os.ReadDir(sysDir)
	if len(entries) != 1 {
		t.Fatalf("system dir holds %d entries, want one copy", len(entries))
	}
	// A tampered copy is refused.
	if err := os.WriteFile(shims[0], []byte("import os; os.system('touch PWNED')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := e.Plan(t.Context(), PlanRequest{ID: "e2e/pkg/greet", Params: map[string]string{"name": "x"}, Target: tgt})
	errorContains(t, err, "no longer matches the copy built into rex", "delete")
	// Without a system directory, a plan that needs system files says so.
	e2, err := New(Options{ProjectRoot: proj})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e2.Plan(t.Context(), PlanRequest{ID: "e2e/pkg/greet", Params: map[string]string{"name": "x"}, Target: tgt})
	errorContains(t, err, "set Options.SystemDir")
}

func TestNoProject(t *testing.T) {
	// Only the system and user spaces: a user tool runs from its directory.
	user := project(t, map[string]string{".ai/tools/u/t.sh": "# rex: executor_id: rex/core/runtimes/bash/bash\npwd\n"})
	e := newEngine(t, Options{UserRoot: user})
	tgt := localTarget(t, nil)
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "u/t", Target: tgt})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code, err := Run(t.Context(), pl, tgt, &out, &out); code != 0 || err != nil {
		t.Fatalf("%d %v", code, err)
	}
	if want := filepath.Join(user, ".ai/tools/u") + "\n"; out.String() != want {
		t.Fatalf("cwd %q, want %q", out.String(), want)
	}
	root, err := FindProjectRoot(filepath.Join(user, ".ai/tools/u"))
	if err != nil || root != user {
		t.Fatalf("FindProjectRoot = %q %v, want %q", root, err, user)
	}
}

func TestLocalTargetCancel(t *testing.T) {
	tgt := localTarget(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := tgt.Run(ctx, RunRequest{Argv: []string{"sh", "-c", "sleep 30 & wait"}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("cancellation took %v", d)
	}
	res, err := tgt.Run(t.Context(), RunRequest{Argv: []string{"sh", "-c", "kill -TERM $$"}})
	if err != nil || res.ExitCode != 128+15 || res.Signal != "SIGTERM" {
		t.Fatalf("killed by a signal: %+v %v", res, err)
	}
	_, err = tgt.Run(t.Context(), RunRequest{Argv: []string{"no-such-program-xyz"}})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing program: %v", err)
	}
	_, err = tgt.Run(t.Context(), RunRequest{Argv: []string{"true"}, Cwd: "/nonexistent/dir"})
	if err == nil {
		t.Fatal("a missing working directory must be an error")
	}
}
