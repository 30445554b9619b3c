package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChainCacheInvalidation(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/c/tool.sh": "# rex: executor_id: rex/core/runtimes/bash/bash\n# rex: description: first\necho\n",
	})
	user := project(t, nil)
	e := newEngine(t, Options{ProjectRoot: proj, UserRoot: user})
	chain := func() *Chain {
		t.Helper()
		c, err := e.Chain("c/tool", nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stats := func(hits, misses int) {
		t.Helper()
		if s := e.CacheStats(); s.ChainHits != hits || s.ChainMisses != misses {
			t.Fatalf("chain cache hits/misses = %d/%d, want %d/%d", s.ChainHits, s.ChainMisses, hits, misses)
		}
	}
	first := chain()
	stats(0, 1)
	if again := chain(); again != first {
		t.Fatal("an unchanged chain must come from the cache")
	}
	stats(1, 1)

	// Editing the tool invalidates.
	writeTree(t, proj, map[string]string{".ai/tools/c/tool.sh": "# rex: executor_id: rex/core/runtimes/bash/bash\n# rex: description: second\necho\n"})
	if c := chain(); c.Tool().Meta.Description != "second" {
		t.Fatalf("after an edit the description is %q", c.Tool().Meta.Description)
	}
	stats(1, 2)

	// A new file in a higher space that shadows the runtime invalidates,
	// though no file of the cached chain changed.
	rt := "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\ndescription: user bash\nconfig: {command: /bin/true}\n"
	writeTree(t, user, map[string]string{".ai/tools/rex/core/runtimes/bash/bash.yaml": rt})
	c := chain()
	if r := c.Elements[1]; r.Space != SpaceUser || r.Meta.Description != "user bash" || len(r.Shadowed) != 1 || r.Shadowed[0].Space != SpaceSystem {
		t.Fatalf("runtime %+v: want the new user file, shadowing the system one", r)
	}
	stats(1, 3)
	// And a project one above that.
	writeTree(t, proj, map[string]string{".ai/tools/rex/core/runtimes/bash/bash.yaml": strings.Replace(rt, "user bash", "project bash", 1)})
	if r := chain().Elements[1]; r.Space != SpaceProject || r.Meta.Description != "project bash" || len(r.Shadowed) != 2 {
		t.Fatalf("runtime %+v: want the project file", r)
	}
	// A new file in the tool's own space with another extension makes the
	// id ambiguous: the cache must not hide that.
	writeTree(t, proj, map[string]string{".ai/tools/c/tool.py": "__executor_id__ = 'rex/core/runtimes/bash/bash'\n"})
	if _, err := e.Chain("c/tool", nil); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Fatalf("got %v, want the ambiguity", err)
	}
	// Removing files brings the lower ones back.
	for _, p := range []string{".ai/tools/c/tool.py", ".ai/tools/rex/core/runtimes/bash/bash.yaml"} {
		if err := os.Remove(filepath.Join(proj, p)); err != nil {
			t.Fatal(err)
		}
	}
	if r := chain().Elements[1]; r.Space != SpaceUser {
		t.Fatalf("after removing the project runtime: %s", r.Space)
	}
}

func TestMetadataCache(t *testing.T) {
	proj := project(t, map[string]string{".ai/tools/m/a.yaml": "executor_id: rex/core/primitives/execute\ndescription: one\n"})
	e := newEngine(t, Options{ProjectRoot: proj})
	list := func() map[string]string {
		items, err := e.List()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, it := range items {
			out[it.ID] = it.Description
		}
		return out
	}
	list()
	misses := e.CacheStats().MetaMisses
	list()
	if s := e.CacheStats(); s.MetaMisses != misses || s.MetaHits < misses {
		t.Fatalf("second list: %+v, want only hits after %d misses", s, misses)
	}
	writeTree(t, proj, map[string]string{".ai/tools/m/a.yaml": "executor_id: rex/core/primitives/execute\ndescription: two\n"})
	if d := list()["m/a"]; d != "two" {
		t.Fatalf("description after edit = %q", d)
	}
	if e.CacheStats().MetaMisses != misses+1 {
		t.Fatalf("an edit must cause exactly one metadata miss: %+v", e.CacheStats())
	}
}

func TestTrace(t *testing.T) {
	toolSrc := "# rex: executor_id: t/rt\n# rex: env_config: {env: {TOOL_KEY: t}}\necho\n"
	proj := project(t, map[string]string{
		".ai/tools/t/tool.sh": toolSrc,
		".ai/tools/t/rt.yaml": "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\nenv_config:\n  env: {RT_A: a, RT_B: b}\nconfig: {command: /bin/true}\n",
		".env":                "DOT=1\n",
	})
	user := project(t, map[string]string{".ai/tools/t/tool.sh": "# rex: executor_id: t/rt\n"})
	e := newEngine(t, Options{ProjectRoot: proj, UserRoot: user})
	pl, err := e.Plan(t.Context(), PlanRequest{ID: "t/tool", Target: localTarget(t, nil), Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(toolSrc))
	hash := hex.EncodeToString(sum[:])
	toolPath := filepath.Join(proj, ".ai/tools/t/tool.sh")
	text := pl.Trace.String()
	for _, want := range []string{
		"cache             t/tool miss: not built yet\n",
		"resolve           t/tool [project] " + toolPath + " tool\n",
		"                    shadows [user] " + filepath.Join(user, ".ai/tools/t/tool.sh") + "\n",
		"verify_integrity  t/tool sha256:" + hash + " verified",
		"resolve           rex/core/primitives/execute [system] builtin:rex/core/primitives/execute primitive\n",
		"validate          t/tool valid\n",
		"resolve_env       .env " + filepath.Join(proj, ".env") + " keys: DOT\n",
		"resolve_env       t/rt keys: RT_A, RT_B\n",
		"resolve_env       t/tool keys: TOOL_KEY\n",
		"ship              [project] " + toolPath + " sha256:" + hash + " tool → " + toolPath + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("trace lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
	// Order: resolution before environment before shipping.
	if strings.Index(text, "resolve ") > strings.Index(text, "resolve_env") || strings.Index(text, "resolve_env") > strings.Index(text, "ship") {
		t.Errorf("events out of order:\n%s", text)
	}
	// A second plan comes from the cache and says so.
	pl, err = e.Plan(t.Context(), PlanRequest{ID: "t/tool", Target: localTarget(t, nil), Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pl.Trace.String(), "cache             t/tool hit") {
		t.Errorf("second trace starts %q", strings.SplitN(pl.Trace.String(), "\n", 2)[0])
	}
	b, err := json.Marshal(pl.Trace)
	if err != nil || !strings.Contains(string(b), `"space":"project"`) {
		t.Errorf("trace JSON %s %v", b, err)
	}
	// Without --trace nothing is recorded.
	pl, _ = e.Plan(t.Context(), PlanRequest{ID: "t/tool", Target: localTarget(t, nil)})
	if pl.Trace != nil {
		t.Error("trace recorded without being asked for")
	}
}
