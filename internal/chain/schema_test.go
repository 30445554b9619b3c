package chain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
		".ai/tools/v/typo.yaml":   "executor_id: v/rt\nconfig_schema:\n  properties:\n    n: {type: strin}\n",
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
	_, err = e.Plan(t.Context(), PlanRequest{ID: "v/typo", Target: localTarget(t, nil)})
	errorContains(t, err, "config_schema is not valid JSON Schema: at /properties/n/type")
}

// mustSchema compiles a config_schema written as JSON.
func mustSchema(t testing.TB, doc string) *paramSchema {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		t.Fatal(err)
	}
	ps, err := compileSchema(raw)
	if err != nil {
		t.Fatalf("compile %s: %v", doc, err)
	}
	return ps
}

func compileText(doc string) error {
	var raw map[string]any
	if err := json.Unmarshal([]byte(doc), &raw); err != nil {
		return err
	}
	_, err := compileSchema(raw)
	return err
}

// TestValidateParamsMessages: every problem is reported at once, one
// sentence each, in the same order whatever order the validator found them.
func TestValidateParamsMessages(t *testing.T) {
	ps := mustSchema(t, `{
		"$defs": {"mode": {"enum": ["fast", "safe"]}},
		"type": "object",
		"properties": {
			"name": {}, "zone": {"type": "integer", "minimum": 1},
			"mode": {"$ref": "#/$defs/mode"},
			"count": {"type": "integer", "minimum": 1},
			"level": {"const": "x"},
			"opts": {"type": "object", "properties": {"depth": {"type": "integer"}}, "required": ["depth", "width"], "additionalProperties": false},
			"tags": {"type": "array", "items": {"type": "string"}, "minItems": 2}
		},
		"required": ["name", "zone"],
		"additionalProperties": false
	}`)
	for _, tt := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"name": 1, "zone": 1}, ""},
		{map[string]any{},
			"tool t/x needs parameter name; pass --param name=VALUE; tool t/x needs parameter zone; pass --param zone=VALUE"},
		{map[string]any{"name": 1, "zone": 1, "bogus": 1, "extra": true},
			`tool t/x has no parameter bogus; see its parameters with "rex tool show t/x"; tool t/x has no parameter extra; see its parameters with "rex tool show t/x"`},
		{map[string]any{"name": 1, "zone": 1, "mode": "slow", "count": 0.5, "level": 2},
			`parameter count must be at least 1, not 0.5; parameter count must be integer, not number; parameter level must be "x", not 2; parameter mode must be one of "fast", "safe", not "slow"`},
		{map[string]any{"name": 1, "zone": 1, "count": 0, "opts": map[string]any{"depth": "deep", "z": 1}, "tags": []any{2}},
			"parameter count must be at least 1, not 0; parameter opts needs width; parameter tags must have at least 2 items, not 1; " +
				"parameter opts.depth must be integer, not string; parameter opts has no key z; parameter tags[0] must be string, not integer"},
	} {
		check(t, ps, tt.params, tt.want)
	}
}

func check(t *testing.T, ps *paramSchema, params map[string]any, want string) {
	t.Helper()
	var got string
	if err := validateParams(ps, "t/x", params); err != nil {
		got = err.Error()
	}
	if got != want {
		t.Errorf("params %v:\n got %q\nwant %q", params, got, want)
	}
}

// TestValidateParamsShapes: keys with slashes, propertyNames,
// dependentSchemas, unevaluatedProperties and false schemas name the
// parameter the operator wrote.
func TestValidateParamsShapes(t *testing.T) {
	ps := mustSchema(t, `{
		"properties": {
			"a/b": {"type": "integer"},
			"m": {"type": "object", "propertyNames": {"maxLength": 2}, "additionalProperties": {"type": "string"}},
			"gone": false,
			"tls": {"type": "boolean"},
			"when": {"format": "nosuch"}
		},
		"dependentSchemas": {"tls": {"required": ["cert"]}},
		"propertyNames": {"pattern": "^[a-z/]+$"},
		"unevaluatedProperties": false
	}`)
	for _, tt := range []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"a/b": 1, "m": map[string]any{"k": "v"}}, ""},
		{map[string]any{"a/b": "x"}, "parameter a/b must be integer, not string"},
		{map[string]any{"m": map[string]any{"long": "v", "k": 1}}, "parameter m.k must be string, not integer; parameter m has no key long"},
		{map[string]any{"gone": 1}, `tool t/x has no parameter gone; see its parameters with "rex tool show t/x"`},
		{map[string]any{"tls": true}, "tool t/x needs parameter cert; pass --param cert=VALUE"},
		{map[string]any{"m": map[string]any{}, "when": "x"}, "parameter when cannot be checked: its schema's format nosuch is not one rex knows; the tool's config_schema needs fixing"},
		{map[string]any{"Up": 1}, `tool t/x has no parameter Up; see its parameters with "rex tool show t/x"`},
	} {
		check(t, ps, tt.params, tt.want)
	}
}

// TestConfigSchemaCompile: drafts named by $schema are honoured, and a
// schema that is not JSON Schema, names an unknown draft or refers to
// another document is refused with one line saying so.
func TestConfigSchemaCompile(t *testing.T) {
	// Draft 4's boolean exclusiveMaximum only means something under draft 4.
	ps := mustSchema(t, `{"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"n": {"maximum": 5, "exclusiveMaximum": true}}}`)
	errorContains(t, validateParams(ps, "t/x", map[string]any{"n": 5}), "parameter n must be less than 5, not 5")
	for _, tt := range []struct{ doc, want string }{
		{`{"properties": {"n": {"minimum": "one"}}}`, "config_schema is not valid JSON Schema: "},
		{`{"pattern": "("}`, "config_schema is not valid JSON Schema: "},
		{`{"required": "name"}`, "config_schema is not valid JSON Schema: "},
		{`{"$schema": "https://example.com/my-draft", "type": "object"}`, `config_schema is not valid JSON Schema: $schema "https://example.com/my-draft" names no draft rex knows`},
		{`{"properties": {"n": {"$ref": "#/$defs/missing"}}}`, `config_schema is not valid JSON Schema: $ref "#/$defs/missing" points at nothing in the schema`},
		{`{"$ref": "file:///etc/passwd"}`, "config_schema: a config_schema cannot load other documents; keep $ref inside the schema"},
		{`{"$ref": "other.json"}`, "config_schema: a config_schema cannot load other documents; keep $ref inside the schema"},
	} {
		err := compileText(tt.doc)
		errorContains(t, err, tt.want)
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tt.doc, err)
		}
	}
}

// TestConfigSchemaMetaschema: a schema that breaks its draft's metaschema
// is refused, one line naming where; valid schemas of every draft pass.
func TestConfigSchemaMetaschema(t *testing.T) {
	var k metaschemaCheck
	for _, tt := range []struct{ doc, want, also string }{
		{`{"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "format": "date"}}, "required": ["n"], "$defs": {"a": {"enum": [1, "x"]}}}`, "", ""},
		{`{"$schema": "https://json-schema.org/draft/2019-09/schema", "properties": {"n": {"type": "string"}}}`, "", ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"n": {"type": "string"}}}`, "", ""},
		{`{"properties": {"n": {"type": "strin"}}}`, "config_schema is not valid JSON Schema: at /properties/n/type: ", "Value strin should be one of the allowed values"},
		{`{"properties": {"n": {"minLength": -1}}}`, "config_schema is not valid JSON Schema: at /properties/n/minLength: -1 should be at least 0", ""},
		{`{"required": ["a", "a"]}`, "config_schema is not valid JSON Schema: at /required: ", ""},
		{`{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "strin"}`, "config_schema is not valid JSON Schema: at /type: ", ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "maxItems": -2}`, "config_schema is not valid JSON Schema: at /maxItems: ", ""},
	} {
		var raw map[string]any
		if err := json.Unmarshal([]byte(tt.doc), &raw); err != nil {
			t.Fatal(err)
		}
		err := k.check(raw)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s was refused: %v", tt.doc, err)
			}
			continue
		}
		errorContains(t, err, tt.want, tt.also)
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", tt.doc, err)
		}
	}
}

// TestConfigSchemaFetchesNothing: a $ref naming a URL on a live loopback
// server is refused, and the server sees no request.
func TestConfigSchemaFetchesNothing(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	for _, doc := range []string{
		`{"$ref": "` + srv.URL + `/x"}`,
		`{"properties": {"n": {"$ref": "` + srv.URL + `/x#/a"}}}`,
		`{"$schema": "` + srv.URL + `/meta", "type": "object"}`,
	} {
		err := compileText(doc)
		if err == nil {
			t.Fatalf("%s was accepted", doc)
		}
	}
	errorContains(t, compileText(`{"$ref": "`+srv.URL+`/x"}`), "cannot load other documents")
	srv.Close() // waits for any request in flight
	if n := hits.Load(); n != 0 {
		t.Fatalf("the schema server saw %d requests, want none", n)
	}
}

// FuzzValidateParams: any parameters against any of a few schemas give a
// result without panicking, and the same result every time.
func FuzzValidateParams(f *testing.F) {
	schemas := []string{
		`{"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "multipleOf": 3}, "b": {"enum": ["x", 1, null]}}, "required": ["a"], "additionalProperties": false}`,
		`{"properties": {"s": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 4, "format": "date"}, "l": {"type": "array", "items": {"$ref": "#/$defs/i"}, "uniqueItems": true}}, "$defs": {"i": {"type": "object", "properties": {"k": {"const": {"z": [1]}}}}}}`,
		`{"patternProperties": {"^p": {"type": "number", "exclusiveMaximum": 1.5}}, "anyOf": [{"required": ["p1"]}, {"required": ["q"]}], "not": {"required": ["bad"]}, "unevaluatedProperties": false}`,
		`{"properties": {"n": false, "o": {"oneOf": [{"type": "string"}, {"minLength": 1}]}}}`,
	}
	var compiled []*paramSchema
	for _, s := range schemas {
		compiled = append(compiled, mustSchema(f, s))
	}
	for i, seed := range []string{`{}`, `{"a": 3, "b": "x"}`, `{"a": -1.5, "c": 1}`, `{"s": "abcdef", "l": [{"k": 1}, {"k": 1}]}`,
		`{"p1": 2, "bad": 1, "x~/y": 1}`, `{"n": 1, "o": "a"}`, `{"a": 1e400}`} {
		f.Add(uint8(i), []byte(seed))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		var params map[string]any
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		if d.Decode(&params) != nil || params == nil {
			return
		}
		ps := compiled[int(which)%len(compiled)]
		first := validateParams(ps, "t/f", params)
		again := validateParams(ps, "t/f", params)
		if fmt.Sprint(first) != fmt.Sprint(again) {
			t.Fatalf("two validations differ:\n%v\n%v", first, again)
		}
		if first != nil && strings.Contains(first.Error(), "\n") {
			t.Fatalf("problem is not one line: %q", first)
		}
	})
}
