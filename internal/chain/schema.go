package chain

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kaptinlin/jsonschema"
)

// A tool's config_schema (CONFIG_SCHEMA) is JSON Schema, validated by
// kaptinlin/jsonschema, which the binary links anyway (charm.land/fantasy)
// and which compiles nothing at start-up, unlike santhosh-tekuri/jsonschema
// whose init compiled five drafts' metaschemas in every rex process. Draft
// 2020-12 unless the schema names draft 2019-09, 7, 6 or 4 with $schema;
// every keyword is enforced, formats included. A schema must be
// self-contained: $ref may point inside it, never at another document, and
// the compiler has no loaders, so nothing is ever fetched.

// offlineCompiler is a compiler without the library's http and https
// loaders: a config_schema comes from a tool file and must never make rex
// fetch anything.
func offlineCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	for scheme := range c.Loaders {
		delete(c.Loaders, scheme)
	}
	return c
}

// errNoLoad refuses every document a schema refers to.
var errNoLoad = errors.New("a config_schema cannot load other documents; keep $ref inside the schema")

// paramSchema is a compiled config_schema. The library caches compiled
// patterns inside the schema while it validates, so validations of one
// schema take turns.
type paramSchema struct {
	mu  sync.Mutex
	sch *jsonschema.Schema
}

// compileSchema compiles a config_schema; nil for none.
func compileSchema(raw map[string]any) (*paramSchema, error) {
	if raw == nil {
		return nil, nil
	}
	doc, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("config_schema is not JSON: %w", err)
	}
	c := offlineCompiler()
	c.SetDefaultDialect(jsonschema.Draft202012)
	c.SetAssertFormat(true)
	if s, ok := raw["$schema"]; ok {
		if d, ok := s.(string); !ok || !knownDraft(d) {
			return nil, fmt.Errorf("config_schema is not valid JSON Schema: $schema %s names no draft rex knows; use draft 2020-12, 2019-09, 7, 6 or 4", jsonText(s))
		}
	}
	sch, err := c.Compile(doc)
	if err != nil {
		return nil, fmt.Errorf("config_schema is not valid JSON Schema: %s", oneLine(err.Error()))
	}
	if refs := sch.UnresolvedReferenceURIs(); len(refs) > 0 {
		slices.Sort(refs)
		for _, r := range refs {
			if !strings.HasPrefix(r, "#") {
				return nil, fmt.Errorf("config_schema: %w", errNoLoad)
			}
		}
		return nil, fmt.Errorf("config_schema is not valid JSON Schema: $ref %q points at nothing in the schema", refs[0])
	}
	return &paramSchema{sch: sch}, nil
}

// metaschemaFS holds the metaschemas of drafts 2020-12 and 2019-09 (from
// json-schema.org, as santhosh-tekuri/jsonschema shipped them); the library
// carries only those of drafts 7, 6 and 4.
//
//go:embed metaschema/*.json
var metaschemaFS embed.FS

// metaschemaCheck checks config_schemas against their draft's metaschema,
// as the library's Compile does not: "type": "strin" or "minLength": -1
// would otherwise be accepted. The metaschemas compile on the first schema
// that needs them, once per Engine, so a process that validates no schema
// pays nothing; checks take turns because validation caches inside schemas.
type metaschemaCheck struct {
	mu     sync.Mutex
	c      *jsonschema.Compiler
	loaded map[string]bool // embedded metaschema prefixes compiled into c
}

// check reports the first way raw breaks its draft's metaschema, as one line.
func (k *metaschemaCheck) check(raw map[string]any) error {
	doc, err := json.Marshal(raw)
	if err != nil {
		return fmt.Errorf("config_schema is not JSON: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c == nil {
		k.c = offlineCompiler()
		k.loaded = map[string]bool{}
	}
	// Drafts 2020-12 and 2019-09 against the embedded metaschemas; 7, 6
	// and 4 against the library's own.
	var draft string
	switch s := fmt.Sprint(raw["$schema"]); {
	case raw["$schema"] == nil, strings.Contains(s, "/draft/2020-12/"):
		draft = "2020-12"
	case strings.Contains(s, "/draft/2019-09/"):
		draft = "2019-09"
	}
	var res *jsonschema.EvaluationResult
	if draft != "" {
		if err := k.load(draft); err != nil {
			return err
		}
		ms, err := k.c.Schema("https://json-schema.org/draft/" + draft + "/schema")
		if err != nil {
			return fmt.Errorf("config_schema could not be checked against draft %s: %w", draft, err)
		}
		res = ms.ValidateJSON(doc)
	} else if res, err = k.c.ValidateSchema(doc); err != nil {
		return fmt.Errorf("config_schema could not be checked against its draft: %s", oneLine(err.Error()))
	}
	if res.IsValid() {
		return nil
	}
	var leaves []problem
	metaLeaves(res, "", &leaves)
	if len(leaves) == 0 {
		return errors.New("config_schema is not valid JSON Schema")
	}
	slices.SortFunc(leaves, func(a, b problem) int {
		if c := strings.Compare(a.loc[0], b.loc[0]); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	// Every failure at the first place, as anyOf's branches each say part.
	at := leaves[0].loc[0]
	var msgs []string
	for _, l := range leaves {
		if l.loc[0] == at && !slices.Contains(msgs, oneLine(l.msg)) {
			msgs = append(msgs, oneLine(l.msg))
		}
	}
	if at == "" {
		at = "/"
	}
	return fmt.Errorf("config_schema is not valid JSON Schema: at %s: %s", at, strings.Join(msgs, "; "))
}

// load compiles the embedded metaschemas of one draft, vocabularies first
// so the draft's own document finds them.
func (k *metaschemaCheck) load(draft string) error {
	if k.loaded[draft] {
		return nil
	}
	names, err := metaschemaFS.ReadDir("metaschema")
	if err != nil {
		return fmt.Errorf("read the embedded metaschemas: %w", err)
	}
	var main []byte
	for _, n := range names {
		rest, ok := strings.CutPrefix(n.Name(), draft+"-")
		if !ok {
			continue
		}
		b, err := metaschemaFS.ReadFile("metaschema/" + n.Name())
		if err != nil {
			return fmt.Errorf("read the embedded metaschema %s: %w", n.Name(), err)
		}
		if rest == "schema.json" {
			main = b
			continue
		}
		if _, err := k.c.Compile(b); err != nil {
			return fmt.Errorf("compile the embedded metaschema %s: %w", n.Name(), err)
		}
	}
	if _, err := k.c.Compile(main); err != nil {
		return fmt.Errorf("compile the embedded metaschema of draft %s: %w", draft, err)
	}
	k.loaded[draft] = true
	return nil
}

// metaLeaves collects the failures of a metaschema check that are not
// explained by deeper ones, each at its location in the config_schema.
func metaLeaves(r *jsonschema.EvaluationResult, at string, out *[]problem) {
	if r == nil || r.Valid {
		return
	}
	at += r.InstanceLocation
	explained := false
	for _, d := range r.Details {
		if d != nil && !d.Valid {
			explained = true
			metaLeaves(d, at, out)
		}
	}
	for _, e := range r.Errors {
		if !(wrappers[e.Keyword] && explained) {
			*out = append(*out, problem{loc: []string{at}, msg: e.Error()})
		}
	}
}

// knownDraft reports whether a $schema names a draft the validator knows.
func knownDraft(uri string) bool {
	u := strings.TrimSuffix(strings.TrimSpace(uri), "#")
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	switch u {
	case "json-schema.org/draft/2020-12/schema", "json-schema.org/draft/2019-09/schema",
		"json-schema.org/draft-07/schema", "json-schema.org/draft-06/schema", "json-schema.org/draft-04/schema":
		return true
	}
	return false
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// validateParams checks the parameters against the tool's schema and says
// what is wrong in the operator's terms, one sentence per problem.
func validateParams(ps *paramSchema, toolID string, params map[string]any) error {
	b, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode parameters: %w", err)
	}
	ps.mu.Lock()
	res := ps.sch.ValidateJSON(b)
	ps.mu.Unlock()
	if res.IsValid() {
		return nil
	}
	// The instance as the validator saw it, numbers exact, to quote values.
	var inst any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&inst); err != nil {
		return fmt.Errorf("decode parameters: %w", err)
	}
	w := problemWalk{toolID: toolID, inst: inst, seen: map[string]bool{}}
	w.walk(res, nil, ps.sch)
	if len(w.probs) == 0 {
		return fmt.Errorf("the parameters do not match the schema of %s", toolID)
	}
	// The library keeps errors in maps; sort so the same mistake always
	// reads the same, shallowest parameter first.
	slices.SortStableFunc(w.probs, func(a, b problem) int {
		if c := len(a.loc) - len(b.loc); c != 0 {
			return c
		}
		if c := slices.Compare(a.loc, b.loc); c != 0 {
			return c
		}
		return strings.Compare(a.msg, b.msg)
	})
	msgs := make([]string, len(w.probs))
	for i, p := range w.probs {
		msgs[i] = p.msg
	}
	return errors.New(strings.Join(msgs, "; "))
}

type problem struct {
	loc []string
	msg string
}

// problemWalk turns an evaluation result tree into operator sentences.
type problemWalk struct {
	toolID string
	inst   any
	seen   map[string]bool
	probs  []problem
}

func (w *problemWalk) add(loc []string, msg string) {
	if msg == "" || w.seen[msg] {
		return
	}
	w.seen[msg] = true
	w.probs = append(w.probs, problem{loc: slices.Clone(loc), msg: msg})
}

// wrappers are keywords whose failure is explained by the results of the
// subschemas they apply; they speak only when those say nothing.
var wrappers = map[string]bool{
	"$ref": true, "$dynamicRef": true, "properties": true, "patternProperties": true,
	"additionalProperties": true, "items": true, "prefixItems": true, "allOf": true,
	"anyOf": true, "oneOf": true, "if": true, "then": true, "else": true,
	"dependentSchemas": true, "propertyNames": true, "unevaluatedProperties": true,
	"unevaluatedItems": true, "contains": true, "contentSchema": true,
}

// walk reports the problems of one result; node is the schema that
// produced it when known (nil when the path is ambiguous).
func (w *problemWalk) walk(r *jsonschema.EvaluationResult, loc []string, node *jsonschema.Schema) {
	if r == nil || r.Valid {
		return
	}
	// A detail's instance location is one property name or index, which the
	// library writes unescaped after a slash.
	if l, ok := strings.CutPrefix(r.InstanceLocation, "/"); ok {
		loc = append(slices.Clip(loc), l)
	}
	if _, ok := w.at(loc); !ok {
		// The library also checks a missing required property, as null,
		// against its schema; "required" has said what is wrong.
		return
	}
	explained := false
	for _, d := range r.Details {
		if d != nil && !d.Valid {
			explained = true
		}
	}
	keys := make([]string, 0, len(r.Errors))
	for k := range r.Errors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e := r.Errors[k]
		if wrappers[e.Keyword] && explained {
			continue
		}
		w.add(loc, w.sentence(loc, node, e))
	}
	for _, d := range r.Details {
		if d == nil || d.Valid {
			continue
		}
		kw, _, _ := strings.Cut(strings.TrimPrefix(d.EvaluationPath, "/"), "/")
		switch kw {
		case "propertyNames":
			// The library checks the name at the property's location.
			if l, ok := strings.CutPrefix(d.InstanceLocation, "/"); ok {
				w.add(append(slices.Clip(loc), l), w.badName(loc, l))
			}
			continue
		case "dependentSchemas":
			// The dependent schema applies to the object itself, though the
			// library places it at the property that triggers it.
			d2 := *d
			d2.InstanceLocation = ""
			w.walk(&d2, loc, childSchema(node, d.EvaluationPath))
			continue
		}
		w.walk(d, loc, childSchema(node, d.EvaluationPath))
	}
}

// badName says that the object at loc may not hold key; the same
// sentence whichever keyword (additionalProperties, propertyNames, a false
// schema) forbids it, so one mistake reads once.
func (w *problemWalk) badName(loc []string, key string) string {
	if len(loc) == 0 {
		return fmt.Sprintf("tool %s has no parameter %s; see its parameters with \"rex tool show %s\"", w.toolID, key, w.toolID)
	}
	return fmt.Sprintf("parameter %s has no key %s", paramName(loc), key)
}

// childSchema finds the subschema that produced a detail, from the
// detail's evaluation path relative to its parent.
func childSchema(node *jsonschema.Schema, evalPath string) *jsonschema.Schema {
	if node == nil {
		return nil
	}
	var t []string
	if p := strings.TrimPrefix(evalPath, "/"); p != "" {
		// Property names are written unescaped: the rest is one name.
		kw, rest, ok := strings.Cut(p, "/")
		t = []string{kw}
		if ok {
			t = append(t, rest)
		}
	}
	if len(t) == 0 {
		// A $ref's result; with a $dynamicRef too it is ambiguous.
		if node.ResolvedDynamicRef == nil {
			return node.ResolvedRef
		}
		return nil
	}
	index := func(list []*jsonschema.Schema) *jsonschema.Schema {
		if len(t) < 2 {
			return nil
		}
		i, err := strconv.Atoi(t[1])
		if err != nil || i < 0 || i >= len(list) {
			return nil
		}
		return list[i]
	}
	switch t[0] {
	case "properties":
		if node.Properties != nil && len(t) > 1 {
			return (*node.Properties)[t[1]]
		}
	case "items":
		if !slices.Contains([]jsonschema.Dialect{jsonschema.Draft202012, ""}, node.Dialect()) {
			return nil // older drafts' items may be a tuple
		}
		return node.Items
	case "prefixItems":
		return index(node.PrefixItems)
	case "additionalProperties":
		return node.AdditionalProperties
	case "allOf":
		return index(node.AllOf)
	case "anyOf":
		return index(node.AnyOf)
	case "oneOf":
		return index(node.OneOf)
	case "not":
		return node.Not
	case "if":
		return node.If
	case "then":
		return node.Then
	case "else":
		return node.Else
	case "contains":
		return node.Contains
	case "dependentSchemas":
		if len(t) > 1 {
			return node.DependentSchemas[t[1]]
		}
	case "propertyNames":
		return node.PropertyNames
	case "unevaluatedProperties":
		return node.UnevaluatedProperties
	case "unevaluatedItems":
		return node.UnevaluatedItems
	case "contentSchema":
		return node.ContentSchema
	}
	return nil
}

// at is the instance value at loc, and whether there is one.
func (w *problemWalk) at(loc []string) (any, bool) {
	v := w.inst
	for _, t := range loc {
		switch c := v.(type) {
		case map[string]any:
			x, ok := c[t]
			if !ok {
				return nil, false
			}
			v = x
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// paramName renders an instance location: name, name.key, name[1].
func paramName(loc []string) string {
	var b strings.Builder
	for i, p := range loc {
		if _, err := strconv.Atoi(p); err == nil && i > 0 {
			b.WriteString("[" + p + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// quotedNames undoes the library's "'a', 'b'" rendering of property names.
func quotedNames(s string) []string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "'"), "'")
	if s == "" {
		return nil
	}
	return strings.Split(s, "', '")
}

// param is one of the error's parameters as text ("?" when absent).
func param(e *jsonschema.EvaluationError, key string) string {
	v, ok := e.Params[key]
	if !ok || v == nil {
		return "?"
	}
	return fmt.Sprint(v)
}

// sentence explains one failed keyword at loc.
func (w *problemWalk) sentence(loc []string, node *jsonschema.Schema, e *jsonschema.EvaluationError) string {
	name := paramName(loc)
	subject := "parameter " + name
	got, _ := w.at(loc)
	switch e.Code {
	case "missing_required_property", "missing_required_properties":
		missing := quotedNames(param(e, "property"))
		if e.Code == "missing_required_properties" {
			missing = quotedNames(param(e, "properties"))
		}
		var out []string
		for _, m := range missing {
			if len(loc) == 0 {
				out = append(out, fmt.Sprintf("tool %s needs parameter %s; pass --param %s=VALUE", w.toolID, m, m))
			} else {
				out = append(out, fmt.Sprintf("%s needs %s", subject, m))
			}
		}
		return strings.Join(out, "; ")
	case "false_schema_mismatch":
		if len(loc) == 0 {
			return fmt.Sprintf("the schema of %s accepts no parameters", w.toolID)
		}
		parent, key := loc[:len(loc)-1], loc[len(loc)-1]
		if pv, _ := w.at(parent); pv != nil {
			if _, isObj := pv.(map[string]any); isObj {
				// additionalProperties, unevaluatedProperties or a
				// property's schema is false: the key may not be given.
				return w.badName(parent, key)
			}
		}
		return fmt.Sprintf("%s is not allowed by the schema", subject)
	case "value_not_in_enum":
		want := param(e, "expected")
		if node != nil && len(node.Enum) > 0 {
			var ws []string
			for _, v := range node.Enum {
				ws = append(ws, jsonText(v))
			}
			want = strings.Join(ws, ", ")
		}
		return fmt.Sprintf("%s must be one of %s, not %s", subject, want, jsonText(got))
	case "const_mismatch", "const_mismatch_null":
		if node != nil && node.Const != nil && node.Const.IsSet {
			return fmt.Sprintf("%s must be %s, not %s", subject, jsonText(node.Const.Value), jsonText(got))
		}
		return fmt.Sprintf("%s must be the one value its schema allows, not %s", subject, jsonText(got))
	case "type_mismatch":
		return fmt.Sprintf("%s must be %s, not %s", subject, strings.ReplaceAll(param(e, "expected"), ", ", " or "), param(e, "received"))
	case "value_below_minimum":
		return fmt.Sprintf("%s must be at least %s, not %s", subject, param(e, "minimum"), param(e, "value"))
	case "value_above_maximum":
		return fmt.Sprintf("%s must be at most %s, not %s", subject, param(e, "maximum"), param(e, "value"))
	case "exclusive_minimum_mismatch":
		return fmt.Sprintf("%s must be more than %s, not %s", subject, param(e, "exclusive_minimum"), param(e, "value"))
	case "exclusive_maximum_mismatch":
		return fmt.Sprintf("%s must be less than %s, not %s", subject, param(e, "exclusive_maximum"), param(e, "value"))
	case "not_multiple_of":
		return fmt.Sprintf("%s must be a multiple of %s, not %s", subject, param(e, "divisor"), param(e, "value"))
	case "string_too_short":
		return fmt.Sprintf("%s must be at least %s characters long, not %s", subject, param(e, "min_length"), param(e, "length"))
	case "string_too_long":
		return fmt.Sprintf("%s must be at most %s characters long, not %s", subject, param(e, "max_length"), param(e, "length"))
	case "pattern_mismatch":
		return fmt.Sprintf("%s %q does not match the pattern %s", subject, param(e, "value"), param(e, "pattern"))
	case "items_too_short":
		return fmt.Sprintf("%s must have at least %s items, not %s", subject, param(e, "min_items"), param(e, "count"))
	case "items_too_long":
		return fmt.Sprintf("%s must have at most %s items, not %s", subject, param(e, "max_items"), param(e, "count"))
	case "unique_items_mismatch":
		return fmt.Sprintf("%s must hold unique items: items %s and %s are equal", subject, param(e, "index1"), param(e, "index2"))
	case "unknown_format":
		return fmt.Sprintf("%s cannot be checked: its schema's format %s is not one rex knows; the tool's config_schema needs fixing", subject, param(e, "format"))
	case "format_mismatch":
		return fmt.Sprintf("%s %s is not a valid %s", subject, jsonText(got), param(e, "format"))
	}
	if len(loc) == 0 {
		return fmt.Sprintf("the parameters of %s do not match its schema: %s", w.toolID, e.Error())
	}
	return fmt.Sprintf("%s does not match the schema: %s", subject, e.Error())
}
