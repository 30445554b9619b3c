package chain

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Shell and JavaScript tools carry their metadata in a comment header: the
// leading block of comment lines (after an optional #! line, blank lines
// allowed) in which every line that starts with "rex:" after the comment
// marker belongs to a YAML document, with the marker, "rex:" and one space
// removed:
//
//	#!/usr/bin/env bash
//	# rex: executor_id: rex/core/runtimes/bash/bash
//	# rex: version: "1.0.0"
//	# rex: description: Greet someone
//	# rex: config_schema:
//	# rex:   properties:
//	# rex:     name: {type: string}
//	# rex:   required: [name]
//
// The keys are the same as in a YAML item. JavaScript files use "// rex:".
// The header ends at the first line that is not a comment or blank.

const (
	maxHeaderLines = 512
	maxHeaderBytes = 64 << 10
)

// parseHeader extracts and parses the header; doc is the YAML text. found
// is false when the file has no "rex:" lines, which means it is not an item.
func parseHeader(src []byte, marker string) (raw map[string]any, doc []byte, found bool, err error) {
	var lines []string
	rest := src
	for n := 0; len(rest) > 0 && n < maxHeaderLines && len(src)-len(rest) < maxHeaderBytes; n++ {
		var line []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			line, rest = rest, nil
		}
		l := strings.TrimSuffix(string(line), "\r")
		if n == 0 {
			l = strings.TrimPrefix(l, "\ufeff")
			if strings.HasPrefix(l, "#!") {
				continue
			}
		}
		t := strings.TrimLeft(l, " \t")
		if t == "" {
			continue
		}
		if !strings.HasPrefix(t, marker) {
			break
		}
		body := strings.TrimLeft(t[len(marker):], " \t")
		if !strings.HasPrefix(body, "rex:") {
			continue
		}
		body = strings.TrimPrefix(body[len("rex:"):], " ")
		lines = append(lines, body)
	}
	if len(lines) == 0 {
		return nil, nil, false, nil
	}
	doc = []byte(strings.Join(lines, "\n"))
	raw, err = parseYAMLMap(doc)
	if err != nil {
		return nil, doc, true, fmt.Errorf("header: %w", err)
	}
	return raw, doc, true, nil
}

// maxYAMLNodes bounds the nodes a YAML document may expand to, aliases
// included, so a crafted file cannot blow up memory.
const maxYAMLNodes = 100000

// parseYAMLMap parses a YAML document whose top level is a mapping into plain
// Go values (map[string]any, []any, string, int, float64, bool, nil).
func parseYAMLMap(src []byte) (m map[string]any, err error) {
	defer func() {
		// yaml.v3 has panicked on hostile input before; a bad file must
		// not take the console down.
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("yaml: cannot parse: %v", r)
		}
	}()
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, err
	}
	if root.Kind == 0 {
		return map[string]any{}, nil
	}
	budget := maxYAMLNodes
	v, err := yamlValue(&root, &budget, 0)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return map[string]any{}, nil
	}
	mm, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the document is not a mapping of keys to values")
	}
	return mm, nil
}

func yamlValue(n *yaml.Node, budget *int, depth int) (any, error) {
	*budget--
	if *budget < 0 {
		return nil, errors.New("the document is too large (aliases expand beyond limits)")
	}
	if depth > maxPyNesting {
		return nil, errors.New("the document is nested too deeply")
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0], budget, depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, errors.New("alias without anchor")
		}
		return yamlValue(n.Alias, budget, depth+1)
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case uint64, int64, float64, bool, string, nil:
			return x, nil
		default:
			// timestamps, binary: keep the text as written
			return n.Value, nil
		}
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := yamlValue(c, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.AliasNode && k.Alias != nil {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a key is not a plain value", k.Line)
			}
			if k.Tag == "!!merge" {
				return nil, fmt.Errorf("line %d: merge keys (<<) are not supported", k.Line)
			}
			v, err := yamlValue(vn, budget, depth+1)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// yamlVersionText returns the text of a top-level "version" scalar as written,
// so `version: 1.0` stays "1.0" (and then fails strict semver) instead of
// becoming the float 1.
func yamlVersionText(src []byte) (string, bool) {
	var root yaml.Node
	if yaml.Unmarshal(src, &root) != nil || len(root.Content) == 0 {
		return "", false
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return "", false
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "version" && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value, true
		}
	}
	return "", false
}
