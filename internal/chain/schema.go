package chain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// A tool's config_schema (CONFIG_SCHEMA) is JSON Schema, validated by
// santhosh-tekuri/jsonschema (draft 2020-12 unless the schema names another
// with $schema): every keyword is enforced, formats included. A schema must
// be self-contained: $ref may point inside it, never at another document.

// schemaURL names a config_schema while it compiles; nothing is fetched.
const schemaURL = "urn:rex:config_schema"

// errNoLoad refuses every document a schema refers to.
var errNoLoad = errors.New("a config_schema cannot load other documents; keep $ref inside the schema")

type noLoader struct{}

func (noLoader) Load(string) (any, error) { return nil, errNoLoad }

// jsonValue turns a metadata value (int64, float64, []any, map[string]any...)
// into the form the validator reads, through JSON.
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// compileSchema compiles a config_schema; nil for none.
func compileSchema(raw map[string]any) (*jsonschema.Schema, error) {
	if raw == nil {
		return nil, nil
	}
	doc, err := jsonValue(raw)
	if err != nil {
		return nil, fmt.Errorf("config_schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("config_schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		if errors.Is(err, errNoLoad) {
			return nil, fmt.Errorf("config_schema: %w", errNoLoad)
		}
		return nil, fmt.Errorf("config_schema is not valid JSON Schema: %s", oneLine(err.Error()))
	}
	return sch, nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, schemaURL, "")), " ")
}

// validateParams checks the parameters against the tool's schema and says
// what is wrong in the operator's terms, one sentence per problem.
func validateParams(sch *jsonschema.Schema, toolID string, params map[string]any) error {
	inst, err := jsonValue(params)
	if err != nil {
		return fmt.Errorf("encode parameters: %w", err)
	}
	err = sch.Validate(inst)
	var ve *jsonschema.ValidationError
	if err == nil || !errors.As(err, &ve) {
		return err
	}
	var msgs []string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		m := paramProblem(toolID, e)
		if m != "" && !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	walk(ve)
	if len(msgs) == 0 {
		return fmt.Errorf("the parameters do not match the schema of %s: %s", toolID, oneLine(ve.Error()))
	}
	return errors.New(strings.Join(msgs, "; "))
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

func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// paramProblem explains one failed keyword.
func paramProblem(toolID string, e *jsonschema.ValidationError) string {
	loc := e.InstanceLocation
	name := paramName(loc)
	subject := "parameter " + name
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var out []string
		for _, m := range k.Missing {
			if len(loc) == 0 {
				out = append(out, fmt.Sprintf("tool %s needs parameter %s; pass --param %s=VALUE", toolID, m, m))
			} else {
				out = append(out, fmt.Sprintf("%s needs %s", subject, m))
			}
		}
		return strings.Join(out, "; ")
	case *kind.AdditionalProperties:
		var out []string
		for _, p := range k.Properties {
			if len(loc) == 0 {
				out = append(out, fmt.Sprintf("tool %s has no parameter %s; see its parameters with \"rex tool show %s\"", toolID, p, toolID))
			} else {
				out = append(out, fmt.Sprintf("%s has no key %s", subject, p))
			}
		}
		return strings.Join(out, "; ")
	case *kind.Enum:
		var want []string
		for _, w := range k.Want {
			want = append(want, jsonText(w))
		}
		return fmt.Sprintf("%s must be one of %s, not %s", subject, strings.Join(want, ", "), jsonText(k.Got))
	case *kind.Const:
		return fmt.Sprintf("%s must be %s, not %s", subject, jsonText(k.Want), jsonText(k.Got))
	case *kind.Type:
		return fmt.Sprintf("%s must be %s, not %s", subject, strings.Join(k.Want, " or "), k.Got)
	case *kind.Minimum:
		return fmt.Sprintf("%s must be at least %s, not %s", subject, ratText(k.Want), ratText(k.Got))
	case *kind.Maximum:
		return fmt.Sprintf("%s must be at most %s, not %s", subject, ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMinimum:
		return fmt.Sprintf("%s must be more than %s, not %s", subject, ratText(k.Want), ratText(k.Got))
	case *kind.ExclusiveMaximum:
		return fmt.Sprintf("%s must be less than %s, not %s", subject, ratText(k.Want), ratText(k.Got))
	case *kind.MultipleOf:
		return fmt.Sprintf("%s must be a multiple of %s, not %s", subject, ratText(k.Want), ratText(k.Got))
	case *kind.MinLength:
		return fmt.Sprintf("%s must be at least %d characters long, not %d", subject, k.Want, k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("%s must be at most %d characters long, not %d", subject, k.Want, k.Got)
	case *kind.Pattern:
		return fmt.Sprintf("%s %q does not match the pattern %s", subject, k.Got, k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("%s must have at least %d items, not %d", subject, k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("%s must have at most %d items, not %d", subject, k.Want, k.Got)
	case *kind.UniqueItems:
		return fmt.Sprintf("%s must hold unique items: items %d and %d are equal", subject, k.Duplicates[0], k.Duplicates[1])
	case *kind.Format:
		return fmt.Sprintf("%s %s is not a valid %s", subject, jsonText(k.Got), k.Want)
	}
	what := e.ErrorKind.LocalizedString(message.NewPrinter(language.English))
	if len(loc) == 0 {
		return fmt.Sprintf("the parameters of %s do not match its schema: %s", toolID, what)
	}
	return fmt.Sprintf("%s does not match the schema: %s", subject, what)
}
