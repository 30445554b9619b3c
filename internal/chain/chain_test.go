package chain

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// runtimeYAML is a minimal runtime that runs printf with its arguments.
func runtimeYAML(executor string, extra string) string {
	return "tool_type: runtime\nexecutor_id: " + executor + "\nversion: \"1.0.0\"\n" +
		"config:\n  command: printf\n  args: [\"%s\\n\", \"{tool_id}\"]\n" + extra
}

func TestResolutionAndShadowing(t *testing.T) {
	tool := func(desc string) string {
		return "executor_id: rex/core/primitives/execute\ndescription: " + desc + "\nconfig: {command: \"true\"}\n"
	}
	proj := project(t, map[string]string{".ai/tools/my/x.yaml": tool("project x"), ".ai/tools/my/only-project.yaml": tool("p")})
	user := project(t, map[string]string{".ai/tools/my/x.yaml": tool("user x"), ".ai/tools/my/y.yaml": tool("user y")})
	sys := mapFS(map[string]string{".ai/tools/my/x.yaml": tool("system x"), ".ai/tools/my/y.yaml": tool("system y"), ".ai/tools/my/z.yaml": tool("system z")})
	e := newEngine(t, Options{ProjectRoot: proj, UserRoot: user, System: sys})

	tests := []struct {
		id       string
		space    Space
		desc     string
		shadowed []Space
	}{
		{"my/x", SpaceProject, "project x", []Space{SpaceUser, SpaceSystem}},
		{"my/y", SpaceUser, "user y", []Space{SpaceSystem}},
		{"my/z", SpaceSystem, "system z", nil},
		{"my/only-project", SpaceProject, "p", nil},
	}
	for _, tt := range tests {
		c, err := e.Chain(tt.id, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.id, err)
		}
		el := c.Tool()
		if el.Space != tt.space || el.Meta.Description != tt.desc {
			t.Errorf("%s resolved to %s %q, want %s %q", tt.id, el.Space, el.Meta.Description, tt.space, tt.desc)
		}
		var got []Space
		for _, s := range el.Shadowed {
			got = append(got, s.Space)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.shadowed) {
			t.Errorf("%s shadows %v, want %v", tt.id, got, tt.shadowed)
		}
		if tt.space != SpaceSystem && !strings.HasPrefix(el.Path, map[Space]string{SpaceProject: proj, SpaceUser: user}[tt.space]) {
			t.Errorf("%s path %s is not in its space", tt.id, el.Path)
		}
	}

	items, err := e.List()
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]ListItem{}
	for _, it := range items {
		byKey[it.ID+"@"+it.Space.String()] = it
	}
	if it := byKey["my/x@project"]; it.ShadowedBy != nil || len(it.Shadows) != 2 {
		t.Errorf("project my/x: shadowed by %v, shadows %v; want the winner over 2 files", it.ShadowedBy, it.Shadows)
	}
	for _, k := range []string{"my/x@user", "my/x@system"} {
		if it := byKey[k]; it.ShadowedBy == nil || it.ShadowedBy.Space != SpaceProject {
			t.Errorf("%s: shadowed by %v, want the project file", k, it.ShadowedBy)
		}
	}
	if it := byKey["my/y@system"]; it.ShadowedBy == nil || it.ShadowedBy.Space != SpaceUser {
		t.Errorf("system my/y: shadowed by %v, want the user file", it.ShadowedBy)
	}
	if it, ok := byKey["rex/core/primitives/execute@system"]; !ok || it.Kind != KindPrimitive {
		t.Errorf("the built-in primitive is missing from the list: %+v", it)
	}
}

func TestResolutionErrors(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/dup/a.py":                       "__executor_id__ = 'rex/core/primitives/execute'\n",
		".ai/tools/dup/a.sh":                       "# rex: executor_id: rex/core/primitives/execute\n",
		".ai/tools/lib/helper.py":                  "def helper(): pass\n",
		".ai/tools/rex/core/primitives/execute.py": "__executor_id__ = 'evil/runtime'\n",
		".ai/tools/bad/exec.yaml":                  "executor_id: 42\n",
		".ai/tools/bad/skip.py":                    "__executor_id__ = compute()\n",
		".ai/tools/use/prim.yaml":                  "executor_id: rex/core/primitives/execute\nconfig: {command: \"true\"}\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	for _, tt := range []struct {
		id    string
		is    error
		parts []string
	}{
		{"no/such", ErrNotFound, []string{"tool no/such not found: no file defines it", `run "rex tool list" to see the ids.`}},
		{"dup/a", nil, []string{"defined twice in the project space", "a.py", "a.sh", "remove all but one"}},
		{"lib/helper", nil, []string{"declares no executor_id"}},
		{"bad/exec", nil, []string{"executor_id must be a string or null"}},
		{"bad/skip", nil, []string{"__executor_id__ is not a literal"}},
		{"../etc/passwd", nil, []string{"ids look like my/tool"}},
	} {
		_, err := e.Chain(tt.id, nil)
		errorContains(t, err, tt.parts...)
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: error %v is not %v", tt.id, err, tt.is)
		}
	}
	// A file that tries to redefine the built-in primitive is ignored.
	tr := &Trace{}
	c, err := e.Chain("use/prim", tr)
	if err != nil {
		t.Fatal(err)
	}
	prim := c.Elements[1]
	if !prim.Builtin || len(prim.Ignored) != 1 || !strings.HasSuffix(prim.Ignored[0].Path, "execute.py") {
		t.Fatalf("primitive %+v: want the built-in with the project file ignored", prim)
	}
	if !strings.Contains(tr.String(), "ignored (primitives are built in)") {
		t.Errorf("trace does not mention the ignored file:\n%s", tr)
	}
}

// depthProject builds tool d/e0 → d/e1 → … → d/e{n-2} → primitive: n elements.
func depthProject(t *testing.T, n int) string {
	files := map[string]string{}
	for i := 0; i < n-1; i++ {
		next := fmt.Sprintf("d/e%d", i+1)
		if i == n-2 {
			next = PrimitiveExecute
		}
		files[fmt.Sprintf(".ai/tools/d/e%d.yaml", i)] = runtimeYAML(next, "")
	}
	return project(t, files)
}

func TestChainDepth(t *testing.T) {
	c, err := newEngine(t, Options{ProjectRoot: depthProject(t, MaxChainDepth)}).Chain("d/e0", nil)
	if err != nil {
		t.Fatalf("a chain of %d elements must build: %v", MaxChainDepth, err)
	}
	if len(c.Elements) != MaxChainDepth || c.Tool().Kind != KindTool || c.Elements[MaxChainDepth-1].Kind != KindPrimitive || c.Elements[1].Kind != KindRuntime {
		t.Fatalf("chain %s: wrong length or kinds", c)
	}
	_, err = newEngine(t, Options{ProjectRoot: depthProject(t, MaxChainDepth+1)}).Chain("d/e0", nil)
	if !errors.Is(err, ErrTooDeep) {
		t.Fatalf("a chain of %d elements: got %v, want ErrTooDeep", MaxChainDepth+1, err)
	}
	errorContains(t, err, "tool d/e0 → runtime d/e1", "runtime d/e9 → ? (", "at most 10 elements")
}

func TestChainCycleAndMissing(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/c/a.yaml":    runtimeYAML("c/b", ""),
		".ai/tools/c/b.yaml":    runtimeYAML("c/a", ""),
		".ai/tools/m/a.py":      "__executor_id__ = 'm/b'\n",
		".ai/tools/m/b.yaml":    runtimeYAML("m/c", ""),
		".ai/tools/m/self.yaml": runtimeYAML("m/self", ""),
		".ai/tools/n/none.yaml": "tool_type: runtime\nexecutor_id: null\n",
		".ai/tools/n/top.yaml":  runtimeYAML("n/none", ""),
		".ai/tools/n/noexec.py": "__tool_type__ = 'python'\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	_, err := e.Chain("c/a", nil)
	if !errors.Is(err, ErrCycle) {
		t.Fatalf("got %v, want ErrCycle", err)
	}
	errorContains(t, err, "chain tool c/a → runtime c/b → ? (cycle back to c/a)", filepath.Join(proj, ".ai/tools/c/b.yaml"))

	_, err = e.Chain("m/self", nil)
	errorContains(t, err, "chain tool m/self → ? (cycle back to m/self)")

	_, err = e.Chain("m/a", nil)
	if !errors.Is(err, ErrMissingExecutor) {
		t.Fatalf("got %v, want ErrMissingExecutor", err)
	}
	errorContains(t, err, "chain tool m/a → runtime m/b → ? (missing m/c)", "fix executor_id in "+filepath.Join(proj, ".ai/tools/m/b.yaml"))

	_, err = e.Chain("n/top", nil)
	errorContains(t, err, "tool n/top → runtime n/none → ? (n/none is not a built-in primitive)")
	_, err = e.Chain("n/noexec", nil)
	errorContains(t, err, "names no executor", "add executor_id")
}

func TestValidation(t *testing.T) {
	tool := func(exec, extra string) string {
		return "executor_id: " + exec + "\n" + extra
	}
	proj := project(t, map[string]string{
		".ai/tools/p/runtime.yaml": runtimeYAML(PrimitiveExecute, ""),
		".ai/tools/io/rt.yaml":     runtimeYAML(PrimitiveExecute, "inputs: [text, json]\n"),
		".ai/tools/io/bad.yaml":    tool("io/rt", "outputs: [text]\n"),
		".ai/tools/io/good.yaml":   tool("io/rt", "outputs: [json, text, extra]\n"),
		".ai/tools/io/undecl.yaml": tool("io/rt", ""),
		".ai/tools/v/rt.yaml":      runtimeYAML(PrimitiveExecute, "child_constraints: {min_version: 2.0.0, max_version: 3.1.0}\n"),
		".ai/tools/v/low.yaml":     tool("v/rt", "version: 1.9.9\n"),
		".ai/tools/v/high.yaml":    tool("v/rt", "version: 3.1.1\n"),
		".ai/tools/v/pre.yaml":     tool("v/rt", "version: 3.1.0-rc.1\n"),
		".ai/tools/v/ok.yaml":      tool("v/rt", "version: 3.1.0\n"),
		".ai/tools/v/none.yaml":    tool("v/rt", ""),
		".ai/tools/v/invalid.py":   "__executor_id__ = 'v/rt'\n__version__ = '2.5'\n",
		".ai/tools/v/float.yaml":   tool("v/rt", "version: 2.5\n"),
		".ai/tools/v/hfloat.sh":    "# rex: executor_id: v/rt\n# rex: version: 2.50\n",
		".ai/tools/v/badrt.yaml":   runtimeYAML(PrimitiveExecute, "child_constraints: {min_version: 2.x}\n"),
		".ai/tools/v/tobad.yaml":   tool("v/badrt", "version: 2.0.0\n"),
		".ai/tools/v/ownbad.yaml":  tool(PrimitiveExecute, "version: latest\nconfig: {command: x}\n"),
	})
	user := project(t, map[string]string{
		".ai/tools/u/tool.yaml":    tool("p/runtime", ""),
		".ai/tools/u/runtime.yaml": runtimeYAML(PrimitiveExecute, ""),
	})
	sys := mapFS(map[string]string{
		".ai/tools/s/tool.yaml": tool("u/runtime", ""),
		".ai/tools/s/proj.yaml": tool("p/runtime", ""),
	})
	e := newEngine(t, Options{ProjectRoot: proj, UserRoot: user, System: sys})
	tests := []struct {
		id    string
		kinds []ProblemKind
		msg   string
	}{
		{"u/tool", []ProblemKind{ProblemSpaceOrder}, "tool u/tool (user) depends on runtime p/runtime (project)"},
		{"s/tool", []ProblemKind{ProblemSystemToMutable}, "a system element may not depend on mutable"},
		{"s/proj", []ProblemKind{ProblemSystemToMutable}, "runtime p/runtime (project)"},
		{"io/bad", []ProblemKind{ProblemIO}, "needs inputs json"},
		{"io/good", nil, ""},
		{"io/undecl", nil, ""},
		{"v/low", []ProblemKind{ProblemVersionRange}, "is version 1.9.9 but runtime v/rt requires a version from 2.0.0 to 3.1.0"},
		{"v/high", []ProblemKind{ProblemVersionRange}, "3.1.1"},
		{"v/pre", nil, ""},
		{"v/ok", nil, ""},
		{"v/none", []ProblemKind{ProblemMissingVersion}, "declares no version"},
		{"v/invalid", []ProblemKind{ProblemInvalidVersion}, `"2.5" is not MAJOR.MINOR.PATCH`},
		{"v/float", []ProblemKind{ProblemInvalidVersion}, "version 2.5 is a number, not a string"},
		{"v/hfloat", []ProblemKind{ProblemInvalidVersion}, "version 2.50 is a number, not a string"},
		{"v/tobad", []ProblemKind{ProblemInvalidVersion}, "child_constraints.min_version"},
		{"v/ownbad", []ProblemKind{ProblemInvalidVersion}, `"latest"`},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			res, err := e.Show(tt.id, false)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []ProblemKind
			for _, p := range res.Problems {
				kinds = append(kinds, p.Kind)
				if !strings.HasSuffix(p.Message, ".") {
					t.Errorf("message %q does not end a sentence", p.Message)
				}
			}
			if fmt.Sprint(kinds) != fmt.Sprint(tt.kinds) {
				t.Fatalf("problems %v (%v), want %v", kinds, res.Problems, tt.kinds)
			}
			if tt.msg != "" && !strings.Contains(res.Problems[0].Message, tt.msg) {
				t.Errorf("message %q does not contain %q", res.Problems[0].Message, tt.msg)
			}
			// Plan refuses exactly the invalid chains.
			_, err = e.Plan(t.Context(), PlanRequest{ID: tt.id, Target: localTarget(t, nil)})
			if got := errors.Is(err, ErrInvalidChain); got != (len(tt.kinds) > 0) {
				t.Fatalf("Plan error %v: invalid=%v, want %v", err, got, len(tt.kinds) > 0)
			}
		})
	}
}
