package chain

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// MaxChainDepth is the most elements a chain may have, tool and primitive
// included.
const MaxChainDepth = 10

// maxItemBytes bounds an item file; metadata never needs more.
const maxItemBytes = 1 << 20

// Kind is an element's role.
type Kind string

// Element kinds. In a chain the kind is positional: the first element is
// the tool, the last the primitive, the ones between runtimes. In a listing
// it comes from the metadata (tool_type: runtime).
const (
	KindTool      Kind = "tool"
	KindRuntime   Kind = "runtime"
	KindPrimitive Kind = "primitive"
)

// The built-in primitives. Execute runs one command (argv, env, cwd,
// stdin) on the target; MCP calls a tool of an MCP server (started on the
// target over stdio, or reached over HTTP); StateGraph walks a graph of
// tool calls.
const (
	PrimitiveExecute    = "rex/core/primitives/execute"
	PrimitiveMCP        = "rex/core/primitives/mcp"
	PrimitiveStateGraph = "rex/core/primitives/state-graph"
)

// builtinPrimitives lists the built-in primitives' ids.
func builtinPrimitives() []string {
	return []string{PrimitiveExecute, PrimitiveMCP, PrimitiveStateGraph}
}

// builtinPrimitive returns the metadata of a built-in primitive id.
func builtinPrimitive(id string) (*Metadata, bool) {
	desc := ""
	switch id {
	case PrimitiveExecute:
		desc = "Runs a command (argv, env, cwd, stdin) on the target; built in."
	case PrimitiveMCP:
		desc = "Calls a tool of an MCP server, started on the target (stdio) or reached over HTTP; built in."
	case PrimitiveStateGraph:
		desc = "Walks a state graph of tool calls, each node on its own targets; built in."
	default:
		return nil, false
	}
	return &Metadata{Primitive: true, Version: "1.0.0", ToolType: "primitive", Description: desc}, true
}

// Sentinel errors, matched with errors.Is.
var (
	ErrNotFound        = errors.New("item not found")
	ErrMissingExecutor = errors.New("executor not found")
	ErrCycle           = errors.New("chain has a cycle")
	ErrTooDeep         = errors.New("chain is too long")
	ErrInvalidChain    = errors.New("chain failed validation")
	ErrNotRunnable     = errors.New("not a tool")
)

// Options configures an Engine.
type Options struct {
	// ProjectRoot is the directory that holds the project's .ai/ (see
	// FindProjectRoot); "" means no project space.
	ProjectRoot string
	// UserRoot is the directory that holds the user's .ai/, normally
	// $XDG_CONFIG_HOME/rex; "" means no user space.
	UserRoot string
	// System is the system space, rooted at the directory holding .ai/;
	// nil means the standard runtimes embedded in rex.
	System fs.FS
	// SystemDir is a local directory (e.g. $XDG_CACHE_HOME/rex/chain) where
	// system-space files are written out when a plan must run or ship them.
	// Plans that need a system file fail without it.
	SystemDir string
}

// Element is one link of a chain. Elements returned by an Engine are shared
// with its cache: treat them as read-only.
type Element struct {
	ID      string
	Kind    Kind
	Space   Space
	Path    string // local path, "system:<rel>" for the embedded space, "builtin:<id>" for built-ins
	Rel     string // slash path relative to the space root (".ai/tools/..."); "" for built-ins
	Hash    string // hex SHA-256 of the file's content; "" for built-ins
	Builtin bool
	Meta    *Metadata
	// Shadowed lists files in lower spaces that define the same id.
	Shadowed []Candidate
	// Ignored lists files that try to redefine a built-in primitive.
	Ignored []Candidate
}

// Chain is a resolved chain, tool first, primitive last.
type Chain struct {
	ID       string
	Elements []*Element
}

// String renders the chain as "tool a → runtime b → primitive c".
func (c *Chain) String() string {
	parts := make([]string, len(c.Elements))
	for i, el := range c.Elements {
		parts[i] = string(el.Kind) + " " + el.ID
	}
	return strings.Join(parts, " → ")
}

// Tool returns the first element.
func (c *Chain) Tool() *Element { return c.Elements[0] }

// Secrets lists the secrets the chain's elements declare, tool first,
// each once.
func (c *Chain) Secrets() []string {
	var out []string
	seen := map[string]bool{}
	for _, el := range c.Elements {
		for _, n := range el.Meta.Secrets {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// MCPTransport is the transport of a chain that ends at the MCP
// primitive, as its merged config says ("stdio" or "http"; the tool's
// config over its runtimes'), or "" for any other chain.
func (c *Chain) MCPTransport() string {
	if c.Elements[len(c.Elements)-1].ID != PrimitiveMCP {
		return ""
	}
	for _, el := range c.Elements {
		if v, ok := el.Meta.Config["transport"]; ok {
			s, _ := v.(string)
			return s
		}
	}
	return ""
}

// Runnable says why id's chain cannot run as a tool, or returns nil: a
// runtime or a primitive asked for directly runs nothing of its own.
func (c *Chain) Runnable() error {
	el := c.Tool()
	switch {
	case el.Meta.Primitive || el.Builtin:
		return &NotRunnableError{ID: c.ID, Msg: fmt.Sprintf("%s is the primitive that runs the command a runtime builds; it does nothing on its own: run a tool (\"rex tool list\" shows them)", c.ID)}
	case el.Meta.ToolType == "runtime":
		return &NotRunnableError{ID: c.ID, Msg: fmt.Sprintf("%s is a runtime, not a tool: it runs the tools that name it in their header (executor_id: %s); write one with \"rex tool new my/tool --runtime %s\" and run that", c.ID, c.ID, c.ID)}
	}
	return nil
}

// NotRunnableError is a runtime or primitive asked to run as a tool.
type NotRunnableError struct {
	ID  string
	Msg string
}

func (e *NotRunnableError) Error() string { return e.Msg }
func (e *NotRunnableError) Unwrap() error { return ErrNotRunnable }

// CacheStats counts cache use since the Engine was made.
type CacheStats struct {
	ChainHits, ChainMisses int
	MetaHits, MetaMisses   int
}

// Engine resolves, validates, plans and caches chains for one project. It
// is safe for concurrent use.
type Engine struct {
	roots     []*spaceRoot // project, user, system: precedence order
	byspace   map[Space]*spaceRoot
	systemDir string

	mu     sync.Mutex
	chains map[string]*chainEntry
	metas  map[metaKey]*metaEntry
	stats  CacheStats

	metaschemas metaschemaCheck // checks each config_schema read from a file
}

type metaKey struct {
	space Space
	rel   string
}

type metaEntry struct {
	hash   string
	meta   *Metadata
	isItem bool
	err    error
}

type chainEntry struct {
	chain *Chain
	fps   []string // per element: which candidate files exist, and the chosen file's hash
}

// New makes an Engine.
func New(opts Options) (*Engine, error) {
	e := &Engine{
		byspace: map[Space]*spaceRoot{},
		chains:  map[string]*chainEntry{},
		metas:   map[metaKey]*metaEntry{},
	}
	for _, r := range []struct {
		space Space
		dir   string
		what  string
	}{{SpaceProject, opts.ProjectRoot, "project root"}, {SpaceUser, opts.UserRoot, "user root"}} {
		if r.dir == "" {
			continue
		}
		abs, err := filepath.Abs(r.dir)
		if err != nil {
			return nil, fmt.Errorf("chain: %s %s: %w", r.what, r.dir, err)
		}
		root := &spaceRoot{space: r.space, fsys: os.DirFS(abs), dir: abs}
		e.roots = append(e.roots, root)
		e.byspace[r.space] = root
	}
	sys := opts.System
	if sys == nil {
		var err error
		if sys, err = embeddedSystem(); err != nil {
			return nil, fmt.Errorf("chain: embedded system space: %w", err)
		}
	}
	root := &spaceRoot{space: SpaceSystem, fsys: sys}
	e.roots = append(e.roots, root)
	e.byspace[SpaceSystem] = root
	if opts.SystemDir != "" {
		abs, err := filepath.Abs(opts.SystemDir)
		if err != nil {
			return nil, fmt.Errorf("chain: system dir %s: %w", opts.SystemDir, err)
		}
		e.systemDir = abs
	}
	return e, nil
}

// ProjectRoot returns the project root the Engine was made with ("" if none).
func (e *Engine) ProjectRoot() string {
	if r := e.byspace[SpaceProject]; r != nil {
		return r.dir
	}
	return ""
}

// CacheStats returns the cache counters.
func (e *Engine) CacheStats() CacheStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// readItem reads a space-relative file, bounded.
func readItem(fsys fs.FS, rel string) ([]byte, error) {
	f, err := fsys.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxItemBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxItemBytes {
		return nil, fmt.Errorf("file is larger than %d bytes", maxItemBytes)
	}
	return b, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// probe is what resolving an id finds on disk, before parsing.
type probe struct {
	found   []*candidateFile // in precedence order
	chosen  *candidateFile   // nil when none
	content []byte
	hash    string
	fp      string
}

type candidateFile struct {
	root *spaceRoot
	rel  string
}

func (c *candidateFile) candidate() Candidate {
	return Candidate{Space: c.root.space, Path: c.root.display(c.rel)}
}

// probeID finds every file that could define id, in every space, and reads
// the one that wins. Its fingerprint changes whenever the resolution could:
// a file added or removed in any space, or the winner's content edited.
func (e *Engine) probeID(id string) (*probe, error) {
	p := &probe{}
	var fp strings.Builder
	for _, r := range e.roots {
		var inSpace []*candidateFile
		for _, ext := range itemExts() {
			rel := toolsDir + "/" + id + ext.ext
			fi, err := fs.Stat(r.fsys, rel)
			if err != nil {
				if errors.Is(err, fs.ErrPermission) {
					return nil, fmt.Errorf("%s: %w", r.display(rel), err)
				}
				continue
			}
			if fi.Mode().IsRegular() {
				inSpace = append(inSpace, &candidateFile{root: r, rel: rel})
				fmt.Fprintf(&fp, "%d:%s;", r.space, rel)
			}
		}
		if len(inSpace) > 1 {
			names := make([]string, len(inSpace))
			for i, c := range inSpace {
				names[i] = c.root.display(c.rel)
			}
			return nil, fmt.Errorf("%s is defined twice in the %s space (%s); remove all but one", id, r.space, strings.Join(names, ", "))
		}
		p.found = append(p.found, inSpace...)
	}
	if _, ok := builtinPrimitive(id); ok || len(p.found) == 0 {
		p.fp = fp.String()
		return p, nil
	}
	p.chosen = p.found[0]
	b, err := readItem(p.chosen.root.fsys, p.chosen.rel)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p.chosen.root.display(p.chosen.rel), err)
	}
	p.content = b
	p.hash = sha256Hex(b)
	fmt.Fprintf(&fp, "#%s", p.hash)
	p.fp = fp.String()
	return p, nil
}

// metadata parses a file through the metadata cache, keyed by location and
// invalidated by content hash.
func (e *Engine) metadata(root *spaceRoot, rel string, content []byte, hash string) (*Metadata, bool, error) {
	key := metaKey{root.space, rel}
	e.mu.Lock()
	if ent, ok := e.metas[key]; ok && ent.hash == hash {
		e.stats.MetaHits++
		e.mu.Unlock()
		return ent.meta, ent.isItem, ent.err
	}
	e.stats.MetaMisses++
	e.mu.Unlock()
	meta, isItem, err := loadMetadata(rel, content)
	if err == nil && meta != nil && meta.ConfigSchema != nil {
		if cerr := e.metaschemas.check(meta.ConfigSchema); cerr != nil {
			meta, err = nil, cerr
		}
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", root.display(rel), err)
	}
	e.mu.Lock()
	e.metas[key] = &metaEntry{hash: hash, meta: meta, isItem: isItem, err: err}
	e.mu.Unlock()
	return meta, isItem, err
}

// resolve finds and loads the element that defines id.
func (e *Engine) resolve(id string) (*Element, string, error) {
	p, err := e.probeID(id)
	if err != nil {
		return nil, "", err
	}
	if meta, ok := builtinPrimitive(id); ok {
		el := &Element{ID: id, Kind: KindPrimitive, Space: SpaceSystem, Path: "builtin:" + id, Builtin: true, Meta: meta}
		for _, c := range p.found {
			el.Ignored = append(el.Ignored, c.candidate())
		}
		return el, p.fp, nil
	}
	if p.chosen == nil {
		return nil, p.fp, ErrNotFound
	}
	meta, isItem, err := e.metadata(p.chosen.root, p.chosen.rel, p.content, p.hash)
	if err != nil {
		return nil, "", err
	}
	if !isItem {
		return nil, "", fmt.Errorf("%s declares no executor_id, so it is not a tool or runtime", p.chosen.root.display(p.chosen.rel))
	}
	el := &Element{
		ID:    id,
		Space: p.chosen.root.space,
		Path:  p.chosen.root.display(p.chosen.rel),
		Rel:   p.chosen.rel,
		Hash:  p.hash,
		Meta:  meta,
	}
	for _, c := range p.found[1:] {
		el.Shadowed = append(el.Shadowed, c.candidate())
	}
	return el, p.fp, nil
}

// ChainError is a chain that could not be built. It names the chain so far.
type ChainError struct {
	ID   string   // the id asked for
	So   []string // the chain so far, "tool a", "runtime b"
	Next string   // the id that could not be added
	What string   // short reason, shown in parentheses
	Hint string   // what to do
	Err  error    // ErrNotFound, ErrMissingExecutor, ErrCycle, ErrTooDeep or a load error
}

func (e *ChainError) Error() string {
	if len(e.So) == 0 && e.Err == ErrNotFound {
		return "tool " + e.Next + " not found: " + e.Hint
	}
	so := append(append([]string{}, e.So...), "? ("+e.What+")")
	msg := "chain " + strings.Join(so, " → ")
	if e.Err != nil && !isSentinel(e.Err) {
		msg += ": " + e.Err.Error()
	}
	return msg + "; " + e.Hint
}

func (e *ChainError) Unwrap() error { return e.Err }

func isSentinel(err error) bool {
	return err == ErrNotFound || err == ErrMissingExecutor || err == ErrCycle || err == ErrTooDeep
}

// Chain resolves id to its chain, from the cache when every file that took
// part is unchanged and no file has appeared or vanished in any space for
// any of its ids. tr, when not nil, records the decisions.
func (e *Engine) Chain(id string, tr *Trace) (*Chain, error) {
	if err := checkID(id); err != nil {
		return nil, fmt.Errorf("chain: %w; ids look like my/tool", err)
	}
	e.mu.Lock()
	ent := e.chains[id]
	e.mu.Unlock()
	if ent != nil {
		reason, err := e.stale(ent)
		if err != nil {
			return nil, err
		}
		if reason == "" {
			e.mu.Lock()
			e.stats.ChainHits++
			e.mu.Unlock()
			tr.add(TraceEvent{Step: StepCache, ItemID: id, Detail: "hit: every participating file and candidate is unchanged"})
			traceChain(ent.chain, tr)
			return ent.chain, nil
		}
		tr.add(TraceEvent{Step: StepCache, ItemID: id, Detail: "miss: " + reason})
	} else {
		tr.add(TraceEvent{Step: StepCache, ItemID: id, Detail: "miss: not built yet"})
	}
	e.mu.Lock()
	e.stats.ChainMisses++
	e.mu.Unlock()
	c, fps, err := e.build(id)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.chains[id] = &chainEntry{chain: c, fps: fps}
	e.mu.Unlock()
	traceChain(c, tr)
	return c, nil
}

// stale explains why a cached chain no longer holds, or returns "".
func (e *Engine) stale(ent *chainEntry) (string, error) {
	for i, el := range ent.chain.Elements {
		p, err := e.probeID(el.ID)
		if err != nil {
			return "", err
		}
		if p.fp == ent.fps[i] {
			continue
		}
		if p.chosen != nil && p.chosen.root.space == el.Space && p.chosen.rel == el.Rel {
			return fmt.Sprintf("%s changed (%s)", el.ID, p.chosen.root.display(p.chosen.rel)), nil
		}
		return fmt.Sprintf("the files that define %s changed", el.ID), nil
	}
	return "", nil
}

func traceChain(c *Chain, tr *Trace) {
	if tr == nil {
		return
	}
	for _, el := range c.Elements {
		ev := TraceEvent{Step: StepResolve, ItemID: el.ID, Path: el.Path, Space: el.Space, Shadowed: el.Shadowed, Detail: string(el.Kind)}
		if len(el.Ignored) > 0 {
			names := make([]string, len(el.Ignored))
			for i, c := range el.Ignored {
				names[i] = c.Path
			}
			ev.Detail += "; ignored (primitives are built in): " + strings.Join(names, ", ")
		}
		tr.add(ev)
		if el.Builtin {
			tr.add(TraceEvent{Step: StepIntegrity, ItemID: el.ID, Verified: boolPtr(true), Detail: "built in"})
		} else {
			tr.add(TraceEvent{Step: StepIntegrity, ItemID: el.ID, Hash: el.Hash, Verified: boolPtr(true), Detail: "metadata parsed from exactly these bytes"})
		}
	}
}

// build resolves the chain from the files.
func (e *Engine) build(id string) (*Chain, []string, error) {
	var elems []*Element
	var fps []string
	seen := map[string]bool{}
	so := func() []string {
		out := make([]string, len(elems))
		for i, el := range elems {
			k := KindRuntime
			if i == 0 {
				k = KindTool
			}
			out[i] = string(k) + " " + el.ID
		}
		return out
	}
	lastPath := func() string { return elems[len(elems)-1].Path }
	cur := id
	for {
		if seen[cur] {
			return nil, nil, &ChainError{ID: id, So: so(), Next: cur, What: "cycle back to " + cur, Err: ErrCycle,
				Hint: fmt.Sprintf("%s is already in the chain; change executor_id in %s so the chain ends at a primitive.", cur, lastPath())}
		}
		if len(elems) >= MaxChainDepth {
			return nil, nil, &ChainError{ID: id, So: so(), Next: cur, What: cur + " would be element " + fmt.Sprint(len(elems)+1), Err: ErrTooDeep,
				Hint: fmt.Sprintf("a chain holds at most %d elements; point an element closer to a primitive.", MaxChainDepth)}
		}
		el, fp, err := e.resolve(cur)
		switch {
		case errors.Is(err, ErrNotFound) && len(elems) == 0:
			return nil, nil, &ChainError{ID: id, Next: cur, What: "missing " + cur, Err: ErrNotFound,
				Hint: `no file defines it in the project, user or system space; run "rex tool list" to see the ids.`}
		case errors.Is(err, ErrNotFound):
			return nil, nil, &ChainError{ID: id, So: so(), Next: cur, What: "missing " + cur, Err: ErrMissingExecutor,
				Hint: fmt.Sprintf("no file defines %s in the project, user or system space; create it under .ai/tools/ or fix executor_id in %s.", cur, lastPath())}
		case err != nil:
			return nil, nil, &ChainError{ID: id, So: so(), Next: cur, What: "cannot load " + cur, Err: err,
				Hint: "fix that file and try again."}
		}
		seen[cur] = true
		elems = append(elems, el)
		fps = append(fps, fp)
		if el.Meta.Primitive {
			if !el.Builtin {
				return nil, nil, &ChainError{ID: id, So: so(), Next: cur, What: cur + " is not a built-in primitive", Err: ErrMissingExecutor,
					Hint: fmt.Sprintf("%s declares no executor, but only a built-in primitive (%s) ends a chain; set its executor_id.", el.Path, strings.Join(builtinPrimitives(), ", "))}
			}
			break
		}
		if el.Meta.ExecutorID == "" {
			return nil, nil, &ChainError{ID: id, So: so(), Next: cur, What: cur + " names no executor", Err: ErrMissingExecutor,
				Hint: fmt.Sprintf("add executor_id (or __executor_id__) to %s.", el.Path)}
		}
		cur = el.Meta.ExecutorID
	}
	// Kinds are positional.
	for i, el := range elems {
		switch {
		case i == 0:
			el.Kind = KindTool
		case i == len(elems)-1:
			el.Kind = KindPrimitive
		default:
			el.Kind = KindRuntime
		}
	}
	return &Chain{ID: id, Elements: elems}, fps, nil
}

// ListItem is one item file (or built-in) as `rex tool list` shows it.
type ListItem struct {
	ID          string
	Space       Space
	Kind        Kind
	Version     string
	Description string
	Path        string
	// ShadowedBy is the higher-space file that wins over this one.
	ShadowedBy *Candidate
	// Shadows lists the lower-space files this one wins over.
	Shadows []Candidate
	// Problem says why the item cannot be used, when it cannot.
	Problem string
}

// skipDirs are directories under .ai/tools that never hold items.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "__pycache__" || name == "node_modules"
}

// List returns every item in every space and the built-in primitives,
// sorted by id and then from the winning space down.
func (e *Engine) List() ([]ListItem, error) {
	var items []ListItem
	for _, r := range e.roots {
		err := fs.WalkDir(r.fsys, toolsDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == toolsDir && errors.Is(err, fs.ErrNotExist) {
					return fs.SkipAll
				}
				return err
			}
			if d.IsDir() {
				if p != toolsDir && skipDir(d.Name()) {
					return fs.SkipDir
				}
				return nil
			}
			if _, ok := formatOf(p); !ok {
				return nil
			}
			id := strings.TrimSuffix(strings.TrimPrefix(p, toolsDir+"/"), path.Ext(p))
			if checkID(id) != nil {
				return nil
			}
			it := ListItem{ID: id, Space: r.space, Path: r.display(p), Kind: KindTool}
			b, err := readItem(r.fsys, p)
			if err != nil {
				it.Problem = err.Error()
				items = append(items, it)
				return nil
			}
			meta, isItem, err := e.metadata(r, p, b, sha256Hex(b))
			switch {
			case err != nil:
				it.Problem = err.Error()
			case !isItem:
				return nil
			default:
				it.Version, it.Description = meta.Version, meta.Description
				if meta.ToolType == "runtime" {
					it.Kind = KindRuntime
				}
				if meta.Primitive {
					it.Kind = KindPrimitive
				}
			}
			if _, ok := builtinPrimitive(id); ok {
				it.Problem = "ignored: primitives are built in and cannot be redefined"
			}
			items = append(items, it)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("list %s space: %w", r.space, err)
		}
	}
	for _, id := range builtinPrimitives() {
		meta, _ := builtinPrimitive(id)
		items = append(items, ListItem{ID: id, Space: SpaceSystem, Kind: KindPrimitive, Version: meta.Version,
			Description: meta.Description, Path: "builtin:" + id})
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].ID != items[j].ID {
			return items[i].ID < items[j].ID
		}
		return items[i].Space > items[j].Space
	})
	// Shadowing: within one id the highest space wins. Built-in primitives
	// always win; files that try to redefine them already carry a problem.
	for i := 0; i < len(items); {
		j := i
		for j < len(items) && items[j].ID == items[i].ID {
			j++
		}
		group := items[i:j]
		i = j
		if _, builtin := builtinPrimitive(group[0].ID); builtin {
			continue
		}
		for k := 1; k < len(group); k++ {
			if group[k].Space == group[k-1].Space {
				msg := fmt.Sprintf("defined twice in the %s space; remove one", group[k].Space)
				group[k].Problem, group[k-1].Problem = msg, msg
			}
		}
		w := Candidate{Space: group[0].Space, Path: group[0].Path}
		for k := 1; k < len(group); k++ {
			group[k].ShadowedBy = &w
			group[0].Shadows = append(group[0].Shadows, Candidate{Space: group[k].Space, Path: group[k].Path})
		}
	}
	return items, nil
}
