package chain

import (
	"strings"
	"testing"
)

func BenchmarkChainCached(b *testing.B) {
	proj := e2eProjectTB(b)
	e := newEngine(b, Options{ProjectRoot: proj})
	if _, err := e.Chain("e2e/pkg/greet", nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Chain("e2e/pkg/greet", nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	proj := e2eProjectTB(b)
	e := newEngine(b, Options{ProjectRoot: proj})
	tgt := localTarget(b, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Plan(b.Context(), PlanRequest{ID: "e2e/pkg/greet", Params: map[string]string{"name": "x"}, Target: tgt}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePython(b *testing.B) {
	src := []byte(strings.Repeat(seedTool, 20))
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		parsePython(src)
	}
}

func BenchmarkRenderShell(b *testing.B) {
	o := renderOpts{
		lookup: func(string) (string, bool) { return "/usr/bin/python3", true },
		vals:   map[string]string{"tool_path": "/p/.ai/tools/x.py", "msg": "$(rm -rf /) it's"},
		mode:   modeShell,
		what:   "bench",
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := render("${PY} {tool_path} --msg {msg} --other {msg}", o); err != nil {
			b.Fatal(err)
		}
	}
}

// e2eProjectTB is e2eProject for benchmarks.
func e2eProjectTB(tb testing.TB) string {
	return project(tb, map[string]string{
		".ai/tools/e2e/pkg/greet.py":    seedTool,
		".ai/tools/e2e/pkg/helper.py":   "def suffix():\n    return '!'\n",
		".ai/tools/e2e/pkg/__init__.py": "",
	})
}
