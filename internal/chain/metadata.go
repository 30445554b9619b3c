package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/rexconsole/rex/internal/secrets"
)

// Metadata is what an item file declares, whatever its format.
type Metadata struct {
	// ExecutorID is the next element of the chain. It is empty for a
	// primitive, which declares executor_id none/null (Primitive is true).
	ExecutorID string
	Primitive  bool

	Version     string
	ToolType    string
	Category    string
	Description string

	Env              *EnvConfig
	Anchor           *AnchorConfig
	VerifyDeps       *VerifyDeps
	Config           map[string]any // execution config: command, args, input_data, cwd, timeout, param_env, ...
	ConfigSchema     map[string]any // the parameters, as JSON Schema
	schema           *paramSchema
	ConfigResolve    *ConfigResolve
	ChildConstraints *Constraints
	Inputs, Outputs  []string // declared I/O types; nil when not declared
	Files            []string // files next to the element that must travel with it
	// Graph is a state-graph tool's graph (YAML key graph).
	Graph *Graph
	// Secrets names the secrets the element needs; each reaches the
	// process as an environment variable of that name (see internal/secrets).
	Secrets []string

	// Notes explains metadata that was present but could not be used, such
	// as a Python assignment that is not a literal.
	Notes []string

	versionProblem string // set when "version" is present but not a string
}

// EnvConfig is env_config: interpreter resolution and static variables.
type EnvConfig struct {
	Interpreter *Interpreter      `json:"interpreter,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
}

// Interpreter kinds.
const (
	InterpLocalBinary  = "local_binary"
	InterpSystemBinary = "system_binary"
	InterpCommand      = "command"
)

// Interpreter says how to find the program that runs a tool, on the target.
type Interpreter struct {
	Type        string   `json:"type"`
	Binary      string   `json:"binary,omitempty"`
	Candidates  []string `json:"candidates,omitempty"`
	SearchPaths []string `json:"search_paths,omitempty"`
	SearchRoots []string `json:"search_roots,omitempty"`
	Var         string   `json:"var"`
	Fallback    string   `json:"fallback,omitempty"`
	ResolveCmd  []string `json:"resolve_cmd,omitempty"`
}

// AnchorConfig sets up module resolution around a tool.
type AnchorConfig struct {
	Enabled    *bool               `json:"enabled,omitempty"`
	Mode       string              `json:"mode,omitempty"` // auto (default), always, never
	MarkersAny []string            `json:"markers_any,omitempty"`
	Root       string              `json:"root,omitempty"` // tool_dir (default), tool_parent, project_path
	Lib        string              `json:"lib,omitempty"`
	Cwd        string              `json:"cwd,omitempty"`
	EnvPaths   map[string]PathEdit `json:"env_paths,omitempty"`
}

// PathEdit adds entries to a PATH-like variable.
type PathEdit struct {
	Prepend []string `json:"prepend,omitempty"`
	Append  []string `json:"append,omitempty"`
}

// VerifyDeps selects the files around an anchor that a tool depends on.
type VerifyDeps struct {
	Enabled     *bool    `json:"enabled,omitempty"`
	Scope       string   `json:"scope,omitempty"` // anchor
	Recursive   *bool    `json:"recursive,omitempty"`
	Extensions  []string `json:"extensions,omitempty"`
	ExcludeDirs []string `json:"exclude_dirs,omitempty"`
}

// Config resolution modes.
const (
	ModeDeepMerge  = "deep_merge"
	ModeFirstMatch = "first_match"
)

// ConfigResolve names a file under .ai/config/ resolved across spaces.
type ConfigResolve struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
}

// Constraints bound the version of the element that depends on this one.
type Constraints struct {
	MinVersion string `json:"min_version,omitempty"`
	MaxVersion string `json:"max_version,omitempty"`
}

// pythonNames lists the Python module globals that carry metadata, with
// their metadata keys. When two globals map to one key the earlier wins.
func pythonNames() [][2]string {
	return [][2]string{
		{"__executor_id__", "executor_id"},
		{"__version__", "version"},
		{"__tool_type__", "tool_type"},
		{"__category__", "category"},
		{"__description__", "description"},
		{"__tool_description__", "description"},
		{"__inputs__", "inputs"},
		{"INPUTS", "inputs"},
		{"__outputs__", "outputs"},
		{"OUTPUTS", "outputs"},
		{"__files__", "files"},
		{"__secrets__", "secrets"},
		{"SECRETS", "secrets"},
		{"ENV_CONFIG", "env_config"},
		{"CONFIG", "config"},
		{"CONFIG_SCHEMA", "config_schema"},
		{"CONFIG_RESOLVE", "config_resolve"},
		{"ANCHOR", "anchor"},
		{"VERIFY_DEPS", "verify_deps"},
		{"CHILD_CONSTRAINTS", "child_constraints"},
	}
}

// loadMetadata reads an item file. isItem is false for files that declare
// neither an executor id nor a tool type (helper modules, libraries).
func loadMetadata(name string, src []byte) (meta *Metadata, isItem bool, err error) {
	format, ok := formatOf(name)
	if !ok {
		return nil, false, nil
	}
	var raw map[string]any
	var notes []string
	var yamlSrc []byte
	switch format {
	case formatPython:
		mod := parsePython(src)
		raw = map[string]any{}
		for _, pn := range pythonNames() {
			pyName, key := pn[0], pn[1]
			if v, ok := mod.Values[pyName]; ok {
				if _, dup := raw[key]; !dup {
					raw[key] = v
				}
			}
			if sk, ok := mod.Skipped[pyName]; ok {
				notes = append(notes, fmt.Sprintf("%s (line %d) was skipped: %s", pyName, sk.Line, sk.Reason))
				if _, has := raw[key]; !has {
					raw[key] = skipped{}
				}
			}
		}
		if mod.Stopped != "" {
			notes = append(notes, "reading stopped early: "+mod.Stopped)
		}
		if _, ok := raw["description"]; !ok && mod.Doc != "" {
			raw["description"] = firstLine(mod.Doc)
		}
	case formatYAML:
		raw, err = parseYAMLMap(src)
		if err != nil {
			return nil, true, err
		}
		yamlSrc = src
	case formatHashHeader, formatSlashHeader:
		marker := "#"
		if format == formatSlashHeader {
			marker = "//"
		}
		var found bool
		raw, yamlSrc, found, err = parseHeader(src, marker)
		if !found {
			return nil, false, nil
		}
		if err != nil {
			return nil, true, err
		}
	}
	_, hasExec := raw["executor_id"]
	_, hasType := raw["tool_type"]
	if !hasExec && !hasType {
		return nil, false, nil
	}
	meta, err = metadataFromRaw(raw, yamlSrc)
	if err != nil {
		return nil, true, err
	}
	meta.Notes = append(notes, meta.Notes...)
	return meta, true, nil
}

// skipped marks a Python name whose value could not be read.
type skipped struct{}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// metadataFromRaw checks and converts the generic key/value form.
func metadataFromRaw(raw map[string]any, yamlSrc []byte) (*Metadata, error) {
	m := &Metadata{}
	for k, v := range raw {
		if _, ok := v.(skipped); ok {
			if k == "executor_id" {
				return nil, errors.New("__executor_id__ is not a literal string; assign it a plain string or None")
			}
			delete(raw, k)
		}
	}
	switch v := raw["executor_id"].(type) {
	case nil:
		// Absent means "not declared"; a tool type alone does not make a
		// primitive, the chain builder reports the missing executor.
		_, m.Primitive = raw["executor_id"]
	case string:
		if v == "" || strings.EqualFold(v, "none") || v == "null" {
			m.Primitive = true
			break
		}
		if err := checkID(v); err != nil {
			return nil, fmt.Errorf("executor_id: %w", err)
		}
		m.ExecutorID = v
	default:
		return nil, fmt.Errorf("executor_id must be a string or null, not %s", typeName(v))
	}
	if v, ok := raw["version"]; ok && v != nil {
		switch x := v.(type) {
		case string:
			m.Version = x
		default:
			text := fmt.Sprint(x)
			if yamlSrc != nil {
				if t, ok := yamlVersionText(yamlSrc); ok {
					text = t
				}
			}
			m.Version = text
			m.versionProblem = fmt.Sprintf("version %s is a %s, not a string; quote it, like \"1.0.0\"", text, typeName(x))
		}
	}
	var err error
	for _, f := range []struct {
		key string
		dst *string
	}{{"tool_type", &m.ToolType}, {"category", &m.Category}, {"description", &m.Description}} {
		if v, ok := raw[f.key]; ok && v != nil {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s must be a string, not %s", f.key, typeName(v))
			}
			*f.dst = s
		}
	}
	if v, ok := raw["env_config"]; ok && v != nil {
		if m.Env, err = envConfigFrom(v); err != nil {
			return nil, fmt.Errorf("env_config: %w", err)
		}
	}
	if v, ok := raw["anchor"]; ok && v != nil {
		m.Anchor = &AnchorConfig{}
		if err := convert(v, m.Anchor); err != nil {
			return nil, fmt.Errorf("anchor: %w", err)
		}
		if err := checkAnchor(m.Anchor); err != nil {
			return nil, fmt.Errorf("anchor: %w", err)
		}
	}
	if v, ok := raw["verify_deps"]; ok && v != nil {
		m.VerifyDeps = &VerifyDeps{}
		if err := convert(v, m.VerifyDeps); err != nil {
			return nil, fmt.Errorf("verify_deps: %w", err)
		}
		if s := m.VerifyDeps.Scope; s != "" && s != "anchor" {
			return nil, fmt.Errorf("verify_deps.scope %q is not supported; use anchor", s)
		}
		for _, d := range m.VerifyDeps.ExcludeDirs {
			if d == "" || strings.Contains(d, "/") {
				return nil, fmt.Errorf("verify_deps.exclude_dirs entry %q must be a plain directory name", d)
			}
		}
	}
	for _, f := range []struct {
		key string
		dst *map[string]any
	}{{"config", &m.Config}, {"config_schema", &m.ConfigSchema}} {
		if v, ok := raw[f.key]; ok && v != nil {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s must be a mapping, not %s", f.key, typeName(v))
			}
			*f.dst = mm
		}
	}
	if m.schema, err = compileSchema(m.ConfigSchema); err != nil {
		return nil, err
	}
	if v, ok := raw["graph"]; ok && v != nil {
		if m.Graph, err = graphFrom(v); err != nil {
			return nil, fmt.Errorf("graph: %w", err)
		}
	}
	if v, ok := raw["config_resolve"]; ok && v != nil {
		m.ConfigResolve = &ConfigResolve{}
		if err := convert(v, m.ConfigResolve); err != nil {
			return nil, fmt.Errorf("config_resolve: %w", err)
		}
		if m.ConfigResolve.Path, err = cleanRel("config_resolve.path", m.ConfigResolve.Path); err != nil {
			return nil, err
		}
		switch m.ConfigResolve.Mode {
		case "":
			m.ConfigResolve.Mode = ModeDeepMerge
		case ModeDeepMerge, ModeFirstMatch:
		default:
			return nil, fmt.Errorf("config_resolve.mode %q is unknown; use deep_merge or first_match", m.ConfigResolve.Mode)
		}
	}
	if v, ok := raw["child_constraints"]; ok && v != nil {
		m.ChildConstraints = &Constraints{}
		if err := convert(v, m.ChildConstraints); err != nil {
			return nil, fmt.Errorf("child_constraints: %w", err)
		}
	}
	for _, f := range []struct {
		key string
		dst *[]string
	}{{"inputs", &m.Inputs}, {"outputs", &m.Outputs}, {"files", &m.Files}, {"secrets", &m.Secrets}} {
		if v, ok := raw[f.key]; ok && v != nil {
			*f.dst = []string{}
			if err := convert(v, f.dst); err != nil {
				return nil, fmt.Errorf("%s: %w", f.key, err)
			}
		}
	}
	for _, name := range m.Secrets {
		if err := secrets.CheckName(name); err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
	}
	for i, f := range m.Files {
		if m.Files[i], err = cleanRel("files entry", f); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// convert moves a generic value into a typed struct through JSON.
func convert(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "value"
			}
			return fmt.Errorf("%s must be %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return err
	}
	return nil
}

func jsonKind(k string) string {
	switch k {
	case "slice":
		return "a list"
	case "struct", "map":
		return "a mapping"
	case "ptr":
		return "a boolean"
	}
	return "a " + k
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64, uint64, float64, int:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "mapping"
	}
	return fmt.Sprintf("%T", v)
}

// scalarString renders a scalar config or env value as text.
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

func envConfigFrom(v any) (*EnvConfig, error) {
	mm, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a mapping, not %s", typeName(v))
	}
	ec := &EnvConfig{}
	if iv, ok := mm["interpreter"]; ok && iv != nil {
		ec.Interpreter = &Interpreter{}
		if err := convert(iv, ec.Interpreter); err != nil {
			return nil, fmt.Errorf("interpreter: %w", err)
		}
		if err := checkInterpreter(ec.Interpreter); err != nil {
			return nil, fmt.Errorf("interpreter: %w", err)
		}
	}
	if ev, ok := mm["env"]; ok && ev != nil {
		em, ok := ev.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("env must be a mapping, not %s", typeName(ev))
		}
		ec.Env = make(map[string]string, len(em))
		for k, val := range em {
			if !isName(k) {
				return nil, fmt.Errorf("env: %q is not a variable name", k)
			}
			s, ok := scalarString(val)
			if val == nil {
				s, ok = "", true
			}
			if !ok {
				return nil, fmt.Errorf("env: %s must be a string, not %s", k, typeName(val))
			}
			ec.Env[k] = s
		}
	}
	return ec, nil
}

func checkInterpreter(in *Interpreter) error {
	if !isName(in.Var) {
		return fmt.Errorf("var %q is not a variable name", in.Var)
	}
	names := append([]string{in.Binary}, in.Candidates...)
	switch in.Type {
	case InterpLocalBinary, InterpSystemBinary:
		if in.Binary == "" {
			return fmt.Errorf("%s needs binary", in.Type)
		}
		for _, n := range names {
			if n == "" || strings.Contains(n, "/") || n == "." || n == ".." {
				return fmt.Errorf("binary name %q must be a plain file name", n)
			}
		}
		for _, sp := range in.SearchPaths {
			if _, err := cleanRel("search_paths entry", sp); err != nil {
				return err
			}
		}
	case InterpCommand:
		if len(in.ResolveCmd) == 0 || in.ResolveCmd[0] == "" {
			return errors.New("command needs resolve_cmd, a list like [pyenv, which, python]")
		}
	default:
		return fmt.Errorf("type %q is unknown; use local_binary, system_binary or command", in.Type)
	}
	if f := in.Fallback; f != "" && strings.Contains(f, "/") && !path.IsAbs(f) {
		return fmt.Errorf("fallback %q must be a program name or an absolute path", f)
	}
	return nil
}

func checkAnchor(a *AnchorConfig) error {
	switch a.Mode {
	case "", "auto", "always", "never":
	default:
		return fmt.Errorf("mode %q is unknown; use auto, always or never", a.Mode)
	}
	switch a.Root {
	case "", "tool_dir", "tool_parent", "project_path":
	default:
		return fmt.Errorf("root %q is unknown; use tool_dir, tool_parent or project_path", a.Root)
	}
	for _, mk := range a.MarkersAny {
		if mk == "" || strings.Contains(mk, "/") || mk == "." || mk == ".." {
			return fmt.Errorf("marker %q must be a plain file name", mk)
		}
	}
	if a.Lib != "" {
		if _, err := cleanRel("lib", a.Lib); err != nil && !strings.HasPrefix(a.Lib, "..") {
			return err
		}
	}
	for k := range a.EnvPaths {
		if !isName(k) {
			return fmt.Errorf("env_paths: %q is not a variable name", k)
		}
	}
	return nil
}

// active reports whether the anchor can take part at all.
func (a *AnchorConfig) active() bool {
	return a != nil && (a.Enabled == nil || *a.Enabled) && a.Mode != "never"
}
