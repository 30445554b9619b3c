package chain

import (
	"testing"
)

// TestConfigSchemaKeywords: every JSON Schema keyword a tool's author
// writes is enforced, not only type and required (issue 14, item 7).
func TestConfigSchemaKeywords(t *testing.T) {
	proj := project(t, map[string]string{
		".ai/tools/v/tool.py": `__executor_id__ = "v/rt"
CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "step": {"type": "integer", "multipleOf": 5},
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "minLength": 2, "maxLength": 8},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2, "uniqueItems": True},
        "opts": {"type": "object", "properties": {"depth": {"type": "integer", "minimum": 0}}, "required": ["depth"]},
        "when": {"type": "string", "format": "date"},
        "level": {"const": "x"},
    },
    "required": ["name"],
    "additionalProperties": False,
}
`,
		".ai/tools/v/rt.yaml":     "tool_type: runtime\nexecutor_id: rex/core/primitives/execute\nconfig:\n  command: \"true\"\n  input_data: \"{params_json}\"\n",
		".ai/tools/v/bad.yaml":    "executor_id: v/rt\nconfig_schema:\n  type: object\n  properties:\n    n: {type: integer, minimum: \"one\"}\n",
		".ai/tools/v/remote.yaml": "executor_id: v/rt\nconfig_schema:\n  $ref: \"file:///etc/passwd\"\n",
	})
	e := newEngine(t, Options{ProjectRoot: proj})
	plan := func(params map[string]string) error {
		_, err := e.Plan(t.Context(), PlanRequest{ID: "v/tool", Target: localTarget(t, nil), Params: params})
		return err
	}
	ok := map[string]string{"name": "web-1", "count": "10", "ratio": "0.5", "step": "15", "tags": `["a","b"]`,
		"opts": `{"depth":0}`, "when": "2026-01-31", "level": "x"}
	if err := plan(ok); err != nil {
		t.Fatalf("a valid set of parameters was refused: %v", err)
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{"name": "web-1"}
		m[k] = v
		return m
	}
	for _, tt := range []struct {
		params map[string]string
		want   []string
	}{
		{with("mode", "slow"), []string{"parameter mode", "must be one of", `"fast"`, `"safe"`}},
		{with("count", "0"), []string{"parameter count", "at least 1"}},
		{with("count", "11"), []string{"parameter count", "at most 10"}},
		{with("ratio", "1"), []string{"parameter ratio", "less than 1"}},
		{with("ratio", "0"), []string{"parameter ratio", "more than 0"}},
		{with("step", "7"), []string{"parameter step", "multiple of 5"}},
		{with("name", "Web"), []string{"parameter name", "does not match", "^[a-z][a-z0-9-]*$"}},
		{with("name", "w"), []string{"parameter name", "at least 2 characters"}},
		{with("name", "abcdefghi"), []string{"parameter name", "at most 8 characters"}},
		{with("tags", `["a","c"]`), []string{"parameter tags[1]", "must be one of"}},
		{with("tags", `["a","a"]`), []string{"parameter tags", "unique"}},
		{with("tags", `["a","b","a"]`), []string{"parameter tags", "at most 2 items"}},
		{with("opts", `{}`), []string{"parameter opts", "needs depth"}},
		{with("opts", `{"depth":-1}`), []string{"parameter opts.depth", "at least 0"}},
		{with("when", "yesterday"), []string{"parameter when", "is not a valid date"}},
		{with("level", "y"), []string{"parameter level", "must be"}},
		{map[string]string{}, []string{"tool v/tool needs parameter name; pass --param name=VALUE"}},
		{with("bogus", "1"), []string{"tool v/tool has no parameter bogus"}},
	} {
		errorContains(t, plan(tt.params), tt.want...)
	}
	// A schema that is not valid JSON Schema makes the tool unusable, with
	// the reason; a schema cannot load other documents.
	_, err := e.Plan(t.Context(), PlanRequest{ID: "v/bad", Target: localTarget(t, nil)})
	errorContains(t, err, "config_schema", "minimum")
	_, err = e.Plan(t.Context(), PlanRequest{ID: "v/remote", Target: localTarget(t, nil)})
	errorContains(t, err, "config_schema", "other documents")
}
