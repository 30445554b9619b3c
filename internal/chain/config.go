package chain

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
)

// resolveConfig loads the config file a tool declares, from .ai/config/ in
// each space. deep_merge merges system, then user, then project (a higher
// space's values win, mappings merge key by key); first_match takes the
// first file found from project down to system. No file anywhere yields an
// empty mapping.
func (e *Engine) resolveConfig(cr *ConfigResolve, tr *Trace) (map[string]any, error) {
	rel := path.Join(configDir, cr.Path)
	var found []*spaceRoot
	var docs []map[string]any
	for _, r := range e.roots { // project, user, system
		src, err := readItem(r.fsys, rel)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", r.display(rel), err)
		}
		m, err := parseYAMLMap(src)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w; fix the file", r.display(rel), err)
		}
		found = append(found, r)
		docs = append(docs, m)
		if cr.Mode == ModeFirstMatch {
			break
		}
	}
	out := map[string]any{}
	var used []Candidate
	for i := len(docs) - 1; i >= 0; i-- {
		out = deepMerge(out, docs[i])
		used = append(used, Candidate{Space: found[i].space, Path: found[i].display(rel)})
	}
	detail := cr.Mode
	if len(used) == 0 {
		detail += ": no file found, resolved_config is empty"
	}
	ev := TraceEvent{Step: StepConfig, Path: cr.Path, Detail: detail}
	for _, u := range used {
		ev.Keys = append(ev.Keys, u.Space.String()+":"+u.Path)
	}
	tr.add(ev)
	return out, nil
}

// deepMerge returns dst with src merged in: mappings merge recursively,
// everything else (lists included) is replaced by src's value.
func deepMerge(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(src))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := out[k].(map[string]any); ok {
				out[k] = deepMerge(dm, sm)
				continue
			}
		}
		out[k] = v
	}
	return out
}
