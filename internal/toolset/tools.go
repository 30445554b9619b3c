package toolset

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Tool describes one tool as models and MCP clients see it.
type Tool struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the input object.
	Schema map[string]any
	// ReadOnly tools change nothing anywhere (MCP readOnlyHint); the
	// agent runs them without asking.
	ReadOnly bool
	// Destructive tools may change or delete things on the target (MCP
	// destructiveHint).
	Destructive bool
	// ChainID is the executor-chain tool behind a chain tool, "" for the
	// built-in ones.
	ChainID string
	// Once is set for a chain tool rex calls itself (an MCP tool over
	// HTTP): it runs once, from this machine, whatever the target.
	Once bool

	decode func(json.RawMessage) (any, error)
}

// Required lists the input fields a call must give.
func (t Tool) Required() []string {
	switch r := t.Schema["required"].(type) {
	case []string:
		return r
	case []any:
		var out []string
		for _, v := range r {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// Properties is the schema's properties object.
func (t Tool) Properties() map[string]any {
	p, _ := t.Schema["properties"].(map[string]any)
	if p == nil {
		p = map[string]any{}
	}
	return p
}

// validate checks an input against the tool: a JSON object with every
// required field, each of the right type.
func (t Tool) validate(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return errors.New("the arguments must be a JSON object")
	}
	var missing []string
	for _, r := range t.Required() {
		if v, ok := obj[r]; !ok || string(v) == "null" {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing required argument %s", strings.Join(missing, ", "))
	}
	if t.decode != nil {
		if _, err := t.decode(raw); err != nil {
			return err
		}
	}
	return nil
}

//go:embed desc/*.md
var descFS embed.FS

func desc(name string) string {
	b, err := descFS.ReadFile("desc/" + name + ".md")
	if err != nil {
		panic("toolset: no description for " + name) // a build mistake, caught by every test
	}
	return strings.TrimSpace(string(b))
}

// The typed inputs of the built-in tools.
type (
	BashInput struct {
		Command  string `json:"command"`
		TimeoutS int    `json:"timeout_s,omitempty"`
		Stdin    string `json:"stdin,omitempty"`
	}
	ReadInput struct {
		Path   string `json:"path"`
		Offset int    `json:"offset,omitempty"`
		Limit  int    `json:"limit,omitempty"`
	}
	WriteInput struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	EditInput struct {
		Path       string `json:"path"`
		Old        string `json:"old"`
		New        string `json:"new"`
		ReplaceAll bool   `json:"replace_all,omitempty"`
	}
	ListInput struct {
		Path  string `json:"path"`
		Depth int    `json:"depth,omitempty"`
	}
	GlobInput struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path,omitempty"`
	}
	GrepInput struct {
		Pattern string `json:"pattern"`
		Path    string `json:"path,omitempty"`
		Glob    string `json:"glob,omitempty"`
	}
	JobInput struct {
		JobID string `json:"job_id"`
		WaitS int    `json:"wait_s,omitempty"`
	}
	JobKillInput struct {
		JobID string `json:"job_id"`
	}
)

// Limits of the inputs.
const (
	defaultTimeout = 60 * time.Second
	maxTimeout     = 3600 * time.Second
	defaultLimit   = 2000
	defaultDepth   = 2
	maxDepth       = 6
	defaultWait    = 30 * time.Second
	maxWait        = 600 * time.Second
)

// limits are the bounds of a toolset's waits, as its options make them;
// the schemas' descriptions state them.
type limits struct {
	defaultTimeout, maxTimeout time.Duration // bash's timeout_s
	defaultWait, maxWait       time.Duration // job_output's wait_s
}

func (o Options) limits() limits {
	l := limits{defaultTimeout: o.DefaultTimeout, maxTimeout: maxTimeout, defaultWait: defaultWait, maxWait: maxWait}
	if l.defaultTimeout <= 0 {
		l.defaultTimeout = defaultTimeout
	}
	if o.MaxWait > 0 {
		l.maxTimeout = min(l.maxTimeout, o.MaxWait)
		l.maxWait = min(l.maxWait, o.MaxWait)
	}
	l.defaultTimeout = min(l.defaultTimeout, l.maxTimeout)
	l.defaultWait = min(l.defaultWait, l.maxWait)
	return l
}

// seconds writes a duration as the whole seconds the schemas speak in.
func seconds(d time.Duration) int { return int(d / time.Second) }

// decoder reads a tool's input strictly: unknown fields and wrong types
// are errors the model can correct.
func decoder[T any]() func(json.RawMessage) (any, error) {
	return func(raw json.RawMessage) (any, error) {
		var v T
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage("{}")
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil {
			return nil, inputError(err)
		}
		return &v, nil
	}
}

// inputError words a JSON decoding error for the model.
func inputError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("argument %s must be %s, not %s", te.Field, jsonType(te.Type.Kind().String()), te.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("there is no argument %s", f)
	}
	return fmt.Errorf("bad arguments: %v", err)
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "int32":
		return "an integer"
	}
	return kind
}

func str(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

func integer(description string) map[string]any {
	return map[string]any{"type": "integer", "description": description}
}

func object(required []string, props map[string]any) map[string]any {
	return map[string]any{
		"type":                 "object",
		"properties":           props,
		"required":             required,
		"additionalProperties": false,
	}
}

// builtinTools are the tools every caller gets, in a fixed order.
func builtinTools(l limits) []Tool {
	return []Tool{
		{Name: Bash, Description: desc(Bash), Destructive: true, decode: decoder[BashInput](),
			Schema: object([]string{"command"}, map[string]any{
				"command": str("The shell command to run (/bin/sh -c) on every host of the target."),
				"timeout_s": integer(fmt.Sprintf("Seconds to wait before the command moves to the background (default %d, at most %d).",
					seconds(l.defaultTimeout), seconds(l.maxTimeout))),
				"stdin": str("Text sent to the command's standard input."),
			})},
		{Name: Read, Description: desc(Read), ReadOnly: true, decode: decoder[ReadInput](),
			Schema: object([]string{"path"}, map[string]any{
				"path":   str("The file to read."),
				"offset": integer("The first line to show, counting from 1."),
				"limit":  integer("How many lines to show (default 2000)."),
			})},
		{Name: Write, Description: desc(Write), Destructive: true, decode: decoder[WriteInput](),
			Schema: object([]string{"path", "content"}, map[string]any{
				"path":    str("The file to write."),
				"content": str("The file's whole new content."),
			})},
		{Name: Edit, Description: desc(Edit), Destructive: true, decode: decoder[EditInput](),
			Schema: object([]string{"path", "old", "new"}, map[string]any{
				"path":        str("The file to edit."),
				"old":         str("The exact text to replace."),
				"new":         str("The text to put in its place."),
				"replace_all": map[string]any{"type": "boolean", "description": "Replace every occurrence of old, not just one."},
			})},
		{Name: List, Description: desc(List), ReadOnly: true, decode: decoder[ListInput](),
			Schema: object([]string{"path"}, map[string]any{
				"path":  str("The directory to list."),
				"depth": integer("How many levels to descend (default 2, at most 6)."),
			})},
		{Name: Glob, Description: desc(Glob), ReadOnly: true, decode: decoder[GlobInput](),
			Schema: object([]string{"pattern"}, map[string]any{
				"pattern": str("The glob pattern, e.g. **/*.conf."),
				"path":    str("The directory to search from."),
			})},
		{Name: Grep, Description: desc(Grep), ReadOnly: true, decode: decoder[GrepInput](),
			Schema: object([]string{"pattern"}, map[string]any{
				"pattern": str("The extended regular expression to search for."),
				"path":    str("The file or directory to search."),
				"glob":    str("Only search files whose names match this glob, e.g. *.conf."),
			})},
		{Name: JobOutput, Description: desc(JobOutput), ReadOnly: true, decode: decoder[JobInput](),
			Schema: object([]string{"job_id"}, map[string]any{
				"job_id": str("The job id a backgrounded bash call returned."),
				"wait_s": integer(fmt.Sprintf("Seconds to wait for the job to end (default %d, at most %d).",
					seconds(l.defaultWait), seconds(l.maxWait))),
			})},
		{Name: JobKill, Description: desc(JobKill), Destructive: true, decode: decoder[JobKillInput](),
			Schema: object([]string{"job_id"}, map[string]any{
				"job_id": str("The job id a backgrounded bash call returned."),
			})},
	}
}

// BuiltinNames are the names of the built-in tools.
func BuiltinNames() []string {
	var names []string
	for _, t := range builtinTools(Options{}.limits()) {
		names = append(names, t.Name)
	}
	return names
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
