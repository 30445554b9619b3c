package chain

import (
	"errors"
	"strings"
	"testing"
)

// TestNotRunnable: a runtime or the primitive asked for directly ends in one
// sentence that says what it is and how to use it.
func TestNotRunnable(t *testing.T) {
	e := newEngine(t, Options{ProjectRoot: project(t, nil)})
	tgt := localTarget(t, nil)
	_, err := e.Plan(t.Context(), PlanRequest{ID: "rex/core/runtimes/bash/bash", Target: tgt})
	if !errors.Is(err, ErrNotRunnable) {
		t.Fatalf("a runtime planned: %v", err)
	}
	errorContains(t, err, "rex/core/runtimes/bash/bash is a runtime, not a tool", `rex tool new my/tool --runtime rex/core/runtimes/bash/bash`)
	if strings.Count(err.Error(), ". ") > 0 || strings.Contains(err.Error(), "\n") {
		t.Errorf("not one sentence: %q", err)
	}
	_, err = e.Plan(t.Context(), PlanRequest{ID: PrimitiveExecute, Target: tgt})
	if !errors.Is(err, ErrNotRunnable) {
		t.Fatalf("the primitive planned: %v", err)
	}
	errorContains(t, err, "is the primitive that runs the command a runtime builds", "rex tool list")
	res, err := e.Show("rex/core/runtimes/bash/bash", false)
	if err != nil || res.NotRunnable == nil {
		t.Errorf("show of a runtime: %v %v", res, err)
	}
}

// TestSecretsDeclared: tools declare secrets by name; the plan lists them
// without their values, refuses templates that would carry them into a
// command line, and refuses reserved names.
func TestSecretsDeclared(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/s/deploy.sh":  "#!/bin/sh\n# rex: executor_id: rex/core/runtimes/sh/sh\n# rex: secrets: [GITHUB_TOKEN]\necho deploying\n",
		".ai/tools/s/leak.yaml":  "executor_id: rex/core/primitives/execute\nsecrets: [API_KEY]\nconfig:\n  command: /bin/echo\n  args: [\"${API_KEY}\"]\n",
		".ai/tools/s/leak2.yaml": "executor_id: rex/core/primitives/execute\nenv_config:\n  env:\n    AUTH: \"Bearer ${API_KEY}\"\nconfig:\n  command: /bin/true\n",
		".ai/tools/s/path.yaml":  "executor_id: rex/core/primitives/execute\nsecrets: [PATH]\nconfig:\n  command: /bin/true\n",
		".ai/tools/s/ld.py":      "__executor_id__ = 'rex/core/primitives/execute'\n__secrets__ = ['LD_PRELOAD']\nCONFIG = {'command': '/bin/true'}\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	tgt := localTarget(t, nil)
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "s/deploy", Target: tgt, Secrets: []string{"DEPLOY_KEY", "GITHUB_TOKEN"}, Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(pl.Secrets, ",") != "GITHUB_TOKEN,DEPLOY_KEY" {
		t.Errorf("plan secrets %q", pl.Secrets)
	}
	if _, ok := pl.Env["GITHUB_TOKEN"]; ok {
		t.Error("the plan holds a secret's variable")
	}
	if !strings.Contains(pl.Trace.String(), "keys: GITHUB_TOKEN, DEPLOY_KEY set when the process starts; values are never planned, traced or shown") {
		t.Errorf("trace:\n%s", pl.Trace)
	}
	_, err = e.Plan(t.Context(), PlanRequest{ID: "s/leak", Target: tgt})
	errorContains(t, err, "${API_KEY} names a secret", "read $API_KEY inside the tool")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "s/leak2", Target: tgt, Secrets: []string{"API_KEY"}})
	errorContains(t, err, "${API_KEY} names a secret")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "s/path", Target: tgt})
	errorContains(t, err, "secret name PATH is refused")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "s/ld", Target: tgt})
	errorContains(t, err, "secret name LD_PRELOAD is refused", "names starting with LD_ are reserved")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "s/deploy", Target: tgt, Secrets: []string{"HOME"}})
	errorContains(t, err, "secret name HOME is refused")
}

// TestShowParams: tool show lists the parameters the schema declares and
// a command line that runs the tool.
func TestShowParams(t *testing.T) {
	e := newEngine(t, Options{ProjectRoot: project(t, nil)})
	res, err := e.Show("rex/ops/service", false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range res.Params {
		got = append(got, p.Name+":"+p.Type+":"+jsonText(p.Default)+":"+jsonText(p.Enum)+":"+jsonText(p.Required))
	}
	want := []string{`name:string:null:null:true`, `action:string:"status":["status","start","stop","restart"]:false`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("params %q\nwant   %q", got, want)
	}
	if ex := res.Example(); ex != "rex tool run rex/ops/service --param name=NAME" {
		t.Errorf("example %q", ex)
	}
}

// TestSystemTools: every tool in the system space plans on this machine
// with its defaults (and its required parameters), and only the tools are
// runnable.
func TestSystemTools(t *testing.T) {
	e := newEngine(t, Options{})
	items, err := e.List()
	if err != nil {
		t.Fatal(err)
	}
	tools := 0
	for _, it := range items {
		if it.Problem != "" {
			t.Errorf("%s: %s", it.ID, it.Problem)
		}
		res, err := e.Show(it.ID, false)
		if err != nil {
			t.Fatalf("%s: %v", it.ID, err)
		}
		if (it.Kind == KindTool) != (res.NotRunnable == nil) {
			t.Errorf("%s is a %s but runnable=%v", it.ID, it.Kind, res.NotRunnable == nil)
		}
		if it.Kind != KindTool {
			continue
		}
		tools++
		params := map[string]string{}
		for _, p := range res.Params {
			if p.Required {
				params[p.Name] = "ssh"
			}
		}
		if _, err := e.Plan(t.Context(), PlanRequest{ID: it.ID, Target: localTarget(t, nil), Params: params}); err != nil {
			t.Errorf("%s: %v", it.ID, err)
		}
		if res.Chain.Tool().Meta.Description == "" {
			t.Errorf("%s has no description", it.ID)
		}
	}
	if tools < 7 {
		t.Errorf("%d tools in the system space, want the 7 rex/ops tools at least", tools)
	}
}
