package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/internal/chain"
	"github.com/rexconsole/rex/internal/secrets"
)

// ToolNewSpec is a parsed `rex tool new`.
type ToolNewSpec struct {
	ID string
	// Runtime is sh, bash, python, node or a runtime's id; "" is sh.
	Runtime string
	// User writes into the user space instead of the project's.
	User bool
}

// Bind declares the flags of `rex tool new`.
func (s *ToolNewSpec) Bind(fs *pflag.FlagSet) {
	fs.StringVarP(&s.Runtime, "runtime", "r", "sh", "what runs the tool: "+strings.Join(chain.SkeletonRuntimes(), ", ")+", or a runtime's id")
	fs.BoolVar(&s.User, "user", false, "write it in your user space (~/.config/rex/.ai/tools) instead of the project's")
}

// Args reads the tool id.
func (s *ToolNewSpec) Args(args []string) error {
	if len(args) != 1 {
		return Usagef("which id? usage: rex tool new ID [--runtime %s] [--user]", strings.Join(chain.SkeletonRuntimes(), "|"))
	}
	s.ID = args[0]
	return nil
}

// ToolNew is `rex tool new`: a working tool file to start from, in the
// project's space (created in the working directory when there is no
// project yet) or the user's. It never overwrites a file.
func ToolNew(app *App, o IO, spec ToolNewSpec) error {
	if err := chain.CheckID(spec.ID); err != nil {
		return fmt.Errorf("%w; ids look like my/tool", err)
	}
	eng, err := app.engine()
	if err != nil {
		return err
	}
	ext, content, err := eng.Skeleton(spec.ID, spec.Runtime)
	if err != nil {
		return err
	}
	var root, space string
	switch {
	case spec.User:
		if app.ConfigDir == "" {
			return errors.New("there is no user space: rex does not know its config directory")
		}
		root, space = app.ConfigDir, "user"
	default:
		space = "project"
		if root = eng.ProjectRoot(); root == "" {
			if root, err = app.workDir(); err != nil {
				return err
			}
			fmt.Fprintf(o.Err, "no project here yet: starting one in %s (its .ai/ directory)\n", root)
		}
	}
	base := filepath.Join(root, ".ai", "tools", filepath.FromSlash(spec.ID))
	for _, x := range chain.ItemExtensions() {
		if _, err := os.Lstat(base + x); err == nil {
			return fmt.Errorf("%s already exists; nothing was written (edit it, or pick another id)", base+x)
		}
	}
	file := base + ext
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	mode := os.FileMode(0o644)
	if bytes.HasPrefix(content, []byte("#!")) {
		mode = 0o755
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(file)
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(file)
		return fmt.Errorf("write %s: %w", file, err)
	}
	fmt.Fprintf(o.Out, "created %s (%s space)\n", file, space)
	// Say what the new file shadows, or what shadows it.
	if items, err := eng.List(); err == nil {
		for _, it := range items {
			if it.ID != spec.ID || it.Path == file {
				continue
			}
			if it.ShadowedBy == nil {
				fmt.Fprintf(o.Out, "note: %s in the %s space wins over it; rex runs that one\n", it.Path, it.Space)
			} else {
				fmt.Fprintf(o.Out, "note: it shadows %s (%s space)\n", it.Path, it.Space)
			}
		}
	}
	fmt.Fprintf(o.Out, "check it:  rex tool check %s\nrun it:    rex tool run %s --param name=you\n", spec.ID, spec.ID)
	return nil
}

// ToolCheckSpec is a parsed `rex tool check`.
type ToolCheckSpec struct{ ID string }

// Args reads the tool id.
func (s *ToolCheckSpec) Args(args []string) error {
	if len(args) != 1 {
		return Usagef("which tool? usage: rex tool check ID")
	}
	s.ID = args[0]
	return nil
}

// ToolCheck is `rex tool check`: everything rex can find wrong with a tool
// without running it — its chain and metadata, its parameter schema, its
// templates (planned on this machine) and its file's syntax. One line per
// check; exit 1 when one fails.
func ToolCheck(ctx context.Context, app *App, o IO, spec ToolCheckSpec) error {
	eng, err := app.engine()
	if err != nil {
		return err
	}
	failed := 0
	report := func(ok bool, format string, args ...any) {
		word := "ok  "
		if !ok {
			word = "FAIL"
			failed++
		}
		fmt.Fprintf(o.Out, "%s %s\n", word, fmt.Sprintf(format, args...))
	}
	note := func(format string, args ...any) { fmt.Fprintf(o.Out, "note %s\n", fmt.Sprintf(format, args...)) }
	res, err := eng.Show(spec.ID, false)
	if err != nil {
		report(false, "%v", err)
		return &ExitError{Code: 1}
	}
	tool := res.Chain.Tool()
	report(true, "%s is %s", spec.ID, tool.Path)
	report(true, "chain: %s", res.Chain)
	if res.NotRunnable != nil {
		report(false, "%v", res.NotRunnable)
	}
	for _, p := range res.Problems {
		report(false, "%s", p.Message)
	}
	if tool.Meta.Description == "" {
		note("no description: add one so rex tool list and show say what the tool does")
	}
	if tool.Meta.Version == "" {
		note("no version: add one (\"1.0.0\") so runtimes can constrain it")
	}
	for _, n := range tool.Meta.Notes {
		note("%s", n)
	}
	report(true, "parameters: %d, schema compiles as JSON Schema", len(res.Params))
	// A parameter named like a config key never reaches the templates.
	cfg := map[string]bool{}
	for _, el := range res.Chain.Elements {
		for k := range el.Meta.Config {
			cfg[k] = true
		}
	}
	for _, p := range res.Params {
		if cfg[p.Name] {
			note("parameter %s is named like a config key: the config's value stays in templates; the parameter reaches the tool only on stdin and as REX_PARAM_%s", p.Name, strings.ToUpper(p.Name))
		}
	}
	if res.NotRunnable == nil && len(res.Problems) == 0 {
		// Plan on this machine with sample values: templates, interpreter
		// and files are checked; nothing runs.
		params := map[string]string{}
		for _, p := range res.Params {
			if p.Required {
				params[p.Name] = sampleValue(p)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := eng.Plan(cctx, chain.PlanRequest{ID: spec.ID, Params: params, Target: &chain.LocalTarget{}})
		cancel()
		switch {
		case err == nil:
			report(true, "plans on local: templates, interpreter and files check out")
		case strings.Contains(err.Error(), "parameter"):
			note("not planned with sample parameters (%v); run it to check the templates", err)
		default:
			report(false, "%v", err)
		}
	}
	if ok, msg := syntaxCheck(ctx, tool); msg != "" {
		report(ok, "%s", msg)
	}
	if failed > 0 {
		return &ExitError{Code: 1, Err: fmt.Errorf("%s has %d problem(s)", spec.ID, failed)}
	}
	fmt.Fprintf(o.Out, "%s looks right; run it with: %s\n", spec.ID, res.Example())
	return nil
}

// sampleValue is a value for a required parameter when checking a tool.
func sampleValue(p chain.Param) string {
	if len(p.Enum) > 0 {
		return jsonValueText(p.Enum[0])
	}
	if p.Default != nil {
		return jsonValueText(p.Default)
	}
	switch p.Type {
	case "integer", "number":
		return "1"
	case "boolean":
		return "true"
	case "array":
		return "[]"
	case "object":
		return "{}"
	}
	return "x"
}

// syntaxCheck asks the tool's language to parse its file, when the file is
// on disk and the interpreter is on this machine. It returns "" when it
// cannot check.
func syntaxCheck(ctx context.Context, el *chain.Element) (bool, string) {
	if el.Builtin || strings.HasPrefix(el.Path, "system:") {
		return true, ""
	}
	var argv []string
	switch filepath.Ext(el.Path) {
	case ".sh", ".bash":
		sh := "sh"
		if b, err := os.ReadFile(el.Path); err == nil && (bytes.HasPrefix(b, []byte("#!/bin/bash")) || bytes.HasPrefix(b, []byte("#!/usr/bin/env bash")) || strings.Contains(el.Meta.ExecutorID, "bash")) {
			sh = "bash"
		}
		argv = []string{sh, "-n", el.Path}
	case ".py":
		argv = []string{"python3", "-c", "import ast,sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", el.Path}
	case ".js", ".mjs", ".cjs":
		argv = []string{"node", "--check", el.Path}
	default:
		return true, ""
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return true, fmt.Sprintf("syntax not checked: %s is not installed here", argv[0])
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Env = secrets.Environ() // no process rex starts gets its passphrase
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return false, fmt.Sprintf("syntax (%s): %s", argv[0], msg)
	}
	return true, fmt.Sprintf("syntax: %s parses it", argv[0])
}
