package chain

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestEnvPrecedence: primitive → runtime → tool, the tool's value wins for
// the same key; .env sits below the chain; ${VAR:-default} expands against
// the environment built so far.
func TestEnvPrecedence(t *testing.T) {
	proj := project(t, map[string]string{
		".env": "export SHARED=dotenv\nDOTENV_ONLY='from .env'\nBASE=dotenv-base\n",
		".ai/tools/e/base.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\n" +
			"env_config:\n  env:\n    SHARED: base\n    BASE_ONLY: base\n    LEVEL: base\n" +
			"config:\n  command: /bin/sh\n  args: [\"-c\", \"echo \\\"$SHARED|$BASE_ONLY|$MID_ONLY|$LEVEL|$DOTENV_ONLY|$DERIVED|$DEFAULTED|$TARGET_ONLY\\\"\"]\n",
		".ai/tools/e/mid.yaml": "tool_type: runtime\nexecutor_id: e/base\n" +
			"env_config:\n  env:\n    SHARED: mid\n    MID_ONLY: mid\n    LEVEL: mid\n    DERIVED: \"${LEVEL}+${BASE}\"\n    DEFAULTED: \"${UNSET_VAR:-fallback}\"\n",
		".ai/tools/e/tool.yaml": "executor_id: e/mid\nenv_config:\n  env:\n    SHARED: tool\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	target := localTarget(t, map[string]string{"TARGET_ONLY": "target", "SHARED": "target"})
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "e/tool", Target: target, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"SHARED":      "tool",      // tool beats runtimes, .env and the target
		"BASE_ONLY":   "base",      // kept from the lowest runtime
		"MID_ONLY":    "mid",       //
		"LEVEL":       "mid",       // the nearer runtime beats the farther one
		"DOTENV_ONLY": "from .env", //
		"DERIVED":     "base+dotenv-base",
		"DEFAULTED":   "fallback",
	}
	for k, v := range want {
		if pl.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, pl.Env[k], v)
		}
	}
	var out bytes.Buffer
	code, err := Run(t.Context(), pl, target, &out, &out)
	if err != nil || code != 0 {
		t.Fatalf("run: %d %v %s", code, err, out.String())
	}
	if got := out.String(); got != "tool|base|mid|mid|from .env|base+dotenv-base|fallback|target\n" {
		t.Fatalf("process saw %q", got)
	}
	tr := pl.Trace.String()
	for _, line := range []string{"resolve_env       e/tool keys: SHARED", "resolve_env       e/mid keys: DEFAULTED, DERIVED, LEVEL, MID_ONLY, SHARED", "resolve_env       .env"} {
		if !strings.Contains(tr, line) {
			t.Errorf("trace lacks %q:\n%s", line, tr)
		}
	}
}

func interpProject(t *testing.T, interp string) string {
	return project(t, map[string]string{
		".ai/tools/i/rt.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\nenv_config:\n  interpreter:\n" + interp +
			"config:\n  command: \"${MY_INTERP}\"\n  args: [\"{tool_path}\"]\n",
		".ai/tools/i/tool.yaml": "executor_id: i/rt\n",
	})
}

func TestInterpreterOnTarget(t *testing.T) {
	local := "    type: local_binary\n    binary: python\n    candidates: [python3]\n    search_paths: [.venv/bin, .venv/Scripts]\n    var: MY_INTERP\n    fallback: python3\n"
	tests := []struct {
		name   string
		interp string
		files  func(proj string) map[string]FileInfo
		run    func(RunRequest) (RunResult, error)
		dotenv string
		want   func(proj string) string
		err    []string
	}{
		{"local_binary finds a candidate in a search path", local,
			func(p string) map[string]FileInfo {
				return map[string]FileInfo{p + "/.venv/Scripts/python3": execFile(), p + "/.venv/bin/python": {Exists: true, Mode: 0o644}}
			}, nil, "",
			func(p string) string { return p + "/.venv/Scripts/python3" }, nil},
		{"local_binary prefers the binary, first search path", local,
			func(p string) map[string]FileInfo {
				return map[string]FileInfo{p + "/.venv/bin/python": execFile(), p + "/.venv/bin/python3": execFile(), p + "/.venv/Scripts/python": execFile()}
			}, nil, "",
			func(p string) string { return p + "/.venv/bin/python" }, nil},
		{"local_binary falls back through the target PATH", local,
			func(p string) map[string]FileInfo { return map[string]FileInfo{"/opt/py/bin/python3": execFile()} }, nil, "",
			func(string) string { return "/opt/py/bin/python3" }, nil},
		{"local_binary with search_roots", "    type: local_binary\n    binary: tsx\n    search_paths: [node_modules/.bin]\n    search_roots: [\"{tool_dir}\"]\n    var: MY_INTERP\n    fallback: node\n",
			func(p string) map[string]FileInfo {
				return map[string]FileInfo{p + "/.ai/tools/i/node_modules/.bin/tsx": execFile(), p + "/node_modules/.bin/tsx": execFile()}
			}, nil, "",
			func(p string) string { return p + "/.ai/tools/i/node_modules/.bin/tsx" }, nil},
		{"system_binary searches the target PATH with candidates", "    type: system_binary\n    binary: ruby\n    candidates: [ruby3]\n    var: MY_INTERP\n",
			func(string) map[string]FileInfo {
				return map[string]FileInfo{"/usr/bin/ruby3": execFile(), "/opt/py/bin/ruby": {Exists: true, IsDir: true, Mode: 0o755}}
			}, nil, "",
			func(string) string { return "/usr/bin/ruby3" }, nil},
		{"command prints the interpreter", "    type: command\n    resolve_cmd: [pyenv, which, python]\n    var: MY_INTERP\n    fallback: python3\n",
			func(string) map[string]FileInfo { return nil },
			func(req RunRequest) (RunResult, error) {
				if strings.Join(req.Argv, " ") != "pyenv which python" {
					return RunResult{ExitCode: 2}, nil
				}
				req.Stdout.Write([]byte("/home/u/.pyenv/versions/3.12/bin/python\n"))
				return RunResult{}, nil
			}, "",
			func(string) string { return "/home/u/.pyenv/versions/3.12/bin/python" }, nil},
		{"command fails, fallback is used", "    type: command\n    resolve_cmd: [pyenv, which, python]\n    var: MY_INTERP\n    fallback: python3\n",
			func(string) map[string]FileInfo { return map[string]FileInfo{"/usr/bin/python3": execFile()} },
			func(req RunRequest) (RunResult, error) {
				req.Stderr.Write([]byte("pyenv: not installed\n"))
				return RunResult{ExitCode: 127}, nil
			}, "",
			func(string) string { return "/usr/bin/python3" }, nil},
		{"nothing found", "    type: command\n    resolve_cmd: [pyenv, which, python]\n    var: MY_INTERP\n    fallback: python3\n",
			func(string) map[string]FileInfo { return nil },
			func(req RunRequest) (RunResult, error) {
				req.Stderr.Write([]byte("pyenv: not installed\n"))
				return RunResult{ExitCode: 127}, nil
			}, "", nil,
			[]string{"no interpreter", "on fake", "pyenv: not installed", "install it there or set MY_INTERP in the project's .env"}},
		{".env pins the interpreter", local,
			func(string) map[string]FileInfo { return nil }, nil, "MY_INTERP=/pinned/python\n",
			func(string) string { return "/pinned/python" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proj := interpProject(t, tt.interp)
			if tt.dotenv != "" {
				writeTree(t, proj, map[string]string{".env": tt.dotenv})
			}
			ft := &fakeTarget{env: map[string]string{"PATH": "/opt/py/bin:/usr/bin"}, files: tt.files(proj), run: tt.run}
			pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "i/tool", Target: ft})
			if tt.err != nil {
				errorContains(t, err, tt.err...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want(proj)
			if pl.Env["MY_INTERP"] != want || pl.Argv[0] != want {
				t.Fatalf("interpreter %q, argv[0] %q, want %q (probes %q)", pl.Env["MY_INTERP"], pl.Argv[0], want, ft.probes)
			}
		})
	}
}

// The same three kinds against this machine, for real.
func TestInterpreterLocal(t *testing.T) {
	t.Run("local_binary", func(t *testing.T) {
		proj := interpProject(t, "    type: local_binary\n    binary: python\n    candidates: [python3]\n    search_paths: [.venv/bin]\n    var: MY_INTERP\n    fallback: nonexistent-python\n")
		writeTree(t, proj, map[string]string{".venv/bin/python3": "#!/bin/sh\necho venv-python \"$@\"\n"})
		pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "i/tool", Target: localTarget(t, nil)})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if code, err := Run(t.Context(), pl, localTarget(t, nil), &out, &out); code != 0 || err != nil {
			t.Fatalf("%d %v", code, err)
		}
		if want := "venv-python " + filepath.Join(proj, ".ai/tools/i/tool.yaml") + "\n"; out.String() != want {
			t.Fatalf("got %q, want %q", out.String(), want)
		}
	})
	t.Run("system_binary", func(t *testing.T) {
		proj := interpProject(t, "    type: system_binary\n    binary: no-such-program-xyz\n    candidates: [sh]\n    var: MY_INTERP\n")
		tgt := localTarget(t, nil)
		pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "i/tool", Target: tgt})
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(pl.Argv[0]) != "sh" || !filepath.IsAbs(pl.Argv[0]) {
			t.Fatalf("argv[0] = %q, want an absolute path to sh", pl.Argv[0])
		}
	})
	t.Run("command", func(t *testing.T) {
		proj := interpProject(t, "    type: command\n    resolve_cmd: [/bin/sh, -c, \"echo /resolved/by/command; echo more\"]\n    var: MY_INTERP\n")
		pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "i/tool", Target: localTarget(t, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if pl.Argv[0] != "/resolved/by/command" {
			t.Fatalf("argv[0] = %q", pl.Argv[0])
		}
	})
}

func anchorProject(t *testing.T, anchor string, files map[string]string) string {
	all := map[string]string{
		".ai/tools/a/rt.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\n" + anchor +
			"verify_deps:\n  extensions: [.py]\n  exclude_dirs: [__pycache__]\n" +
			"config:\n  command: /bin/sh\n  args: [\"-c\", \"echo \\\"$PYTHONPATH\\\"\"]\n",
	}
	for k, v := range files {
		all[k] = v
	}
	return project(t, all)
}

func TestAnchor(t *testing.T) {
	tool := "executor_id: a/rt\n"
	auto := "anchor:\n  mode: auto\n  markers_any: [__init__.py]\n  lib: lib\n  env_paths:\n    PYTHONPATH:\n      prepend: [\"{anchor_path}\", \"{runtime_lib}\"]\n      append: [\"{project_path}/extra\"]\n"
	t.Run("auto finds the marker walking up", func(t *testing.T) {
		proj := anchorProject(t, auto, map[string]string{
			".ai/tools/pkg/__init__.py":      "",
			".ai/tools/pkg/sub/tool.yaml":    tool,
			".ai/tools/pkg/helpers.py":       "X = 1\n",
			".ai/tools/pkg/lib/util.py":      "Y = 2\n",
			".ai/tools/pkg/__pycache__/x.py": "",
			".ai/tools/pkg/notes.txt":        "not a dependency",
			".ai/tools/other/unrelated.py":   "",
			"pyproject.toml":                 "",
		})
		tgt := localTarget(t, map[string]string{"PYTHONPATH": "/existing"})
		pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "pkg/sub/tool", Target: tgt})
		if err != nil {
			t.Fatal(err)
		}
		anchor := filepath.Join(proj, ".ai/tools/pkg")
		want := anchor + ":" + anchor + "/lib:/existing:" + proj + "/extra"
		if pl.Env["PYTHONPATH"] != want {
			t.Fatalf("PYTHONPATH = %q, want %q", pl.Env["PYTHONPATH"], want)
		}
		var rels []string
		for _, f := range pl.Files {
			rels = append(rels, f.Role+":"+f.Rel)
		}
		wantFiles := "tool:project/.ai/tools/pkg/sub/tool.yaml dependency:project/.ai/tools/pkg/__init__.py dependency:project/.ai/tools/pkg/helpers.py dependency:project/.ai/tools/pkg/lib/util.py"
		if strings.Join(rels, " ") != wantFiles {
			t.Fatalf("files %v\nwant %s", rels, wantFiles)
		}
	})
	t.Run("auto without a marker stays inactive and never climbs above .ai/tools", func(t *testing.T) {
		proj := anchorProject(t, auto, map[string]string{".ai/tools/plain/tool.yaml": tool, "__init__.py": "", ".ai/__init__.py": ""})
		pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "plain/tool", Target: localTarget(t, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if _, set := pl.Env["PYTHONPATH"]; set || len(pl.Files) != 1 {
			t.Fatalf("inactive anchor changed PYTHONPATH (%q) or shipped %d files", pl.Env["PYTHONPATH"], len(pl.Files))
		}
	})
	t.Run("always", func(t *testing.T) {
		proj := anchorProject(t, strings.Replace(auto, "mode: auto", "mode: always", 1), map[string]string{".ai/tools/plain/tool.yaml": tool})
		pl, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "plain/tool", Target: localTarget(t, nil)})
		if err != nil {
			t.Fatal(err)
		}
		if d := filepath.Join(proj, ".ai/tools/plain"); !strings.HasPrefix(pl.Env["PYTHONPATH"], d+":"+d+"/lib:") {
			t.Fatalf("PYTHONPATH = %q", pl.Env["PYTHONPATH"])
		}
	})
	t.Run("an env path next to the anchor is outside it", func(t *testing.T) {
		// /proj2/lib starts with the string /proj but is not inside /proj.
		escape := "anchor:\n  mode: always\n  root: project_path\n  env_paths:\n    PYTHONPATH:\n      prepend: [\"{anchor_path}2/lib\"]\n"
		proj := anchorProject(t, escape, map[string]string{".ai/tools/plain/tool.yaml": tool})
		_, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "plain/tool", Target: localTarget(t, nil)})
		errorContains(t, err, proj+"2/lib", "is outside the anchor "+proj, "fix env_paths")
	})
	t.Run("an env path that climbs out", func(t *testing.T) {
		escape := "anchor:\n  mode: always\n  env_paths:\n    PATH:\n      prepend: [\"{anchor_path}/../../../../../../../../../../usr/bin\"]\n"
		proj := anchorProject(t, escape, map[string]string{".ai/tools/plain/tool.yaml": tool})
		_, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "plain/tool", Target: localTarget(t, nil)})
		errorContains(t, err, `"/usr/bin"`, "is outside the anchor")
	})
	t.Run("a lib that leaves the space", func(t *testing.T) {
		escape := "anchor:\n  mode: always\n  lib: ../../../../outside\n"
		proj := anchorProject(t, escape, map[string]string{".ai/tools/plain/tool.yaml": tool})
		_, err := newEngine(t, Options{ProjectRoot: proj}).Plan(t.Context(), PlanRequest{ID: "plain/tool", Target: localTarget(t, nil)})
		errorContains(t, err, "anchor lib", "leaves the project space")
	})
}

func TestLookPathWithStat(t *testing.T) {
	ft := &fakeTarget{files: map[string]FileInfo{
		"/a/prog": {Exists: true, Mode: 0o644},
		"/b/prog": {Exists: true, IsDir: true, Mode: 0o755},
		"/c/prog": execFile(),
	}}
	got, err := LookPathWithStat(context.Background(), ft.Stat, "prog", "::relative:/a:/b:/c")
	if err != nil || got != "/c/prog" {
		t.Fatalf("got %q %v, want /c/prog", got, err)
	}
	if _, err := LookPathWithStat(context.Background(), ft.Stat, "../prog", "/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a name with a slash: %v", err)
	}
	if _, err := LookPathWithStat(context.Background(), ft.Stat, "missing", "/a:/c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}
