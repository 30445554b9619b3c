// Package chain resolves a tool to the runtime that runs it and the runtime
// to a primitive, checks the chain, and computes the exact process that runs
// the tool on a target.
//
// # Items and spaces
//
// Tools and runtimes ("items") live under .ai/tools/ in three spaces:
//
//	project  <project>/.ai/tools        precedence 3 (FindProjectRoot walks up to the first dir with .ai/)
//	user     $XDG_CONFIG_HOME/rex/.ai/tools  precedence 2 (Options.UserRoot is the dir holding .ai/)
//	system   embedded in rex            precedence 1 (the standard runtimes, read-only)
//
// An item's id is its path under .ai/tools without the extension
// (.ai/tools/my/greet.py is my/greet). The highest space that has a file for
// an id wins and shadows the others; two files for one id in the same space
// (greet.py and greet.sh) are an error. The primitive
// rex/core/primitives/execute is built in: a file that tries to redefine it
// is ignored, and says so in List and in the trace.
//
// Metadata is read without running anything:
//
//   - Python (.py): top-level assignments of literals — __executor_id__,
//     __version__, __tool_type__, __category__, __description__ (or
//     __tool_description__, else the docstring's first line), CONFIG,
//     CONFIG_SCHEMA, CONFIG_RESOLVE, ENV_CONFIG, ANCHOR, VERIFY_DEPS,
//     CHILD_CONSTRAINTS, INPUTS, OUTPUTS. Strings in every quoting, numbers,
//     True/False/None, lists, tuples and dicts are understood; anything else
//     is skipped and the reason is kept in Metadata.Notes.
//   - Shell and other "#" scripts (.sh, .bash) and JavaScript (.js, .mjs,
//     .cjs, .ts with "//"): the leading comment block's "# rex: " lines form
//     a YAML document with the same keys as a YAML item (see parseHeader).
//   - YAML (.yaml, .yml): runtimes and YAML tools, keys executor_id, version,
//     tool_type, description, env_config, anchor, verify_deps, config,
//     config_schema, config_resolve, child_constraints, inputs, outputs,
//     files.
//
// A file is an item only if it declares an executor id (or a tool type);
// helper modules next to tools are not items.
//
// # Chains and validation
//
// Engine.Chain follows executor ids from the tool to the primitive, at most
// MaxChainDepth (10) elements. A cycle, a missing executor or a chain that
// is too long is a *ChainError naming the chain so far, e.g.
// "chain tool a → runtime b → ? (missing c): …".
//
// Validate checks each adjacent pair: an element may depend only on its own
// or a lower space (a system element on a user or project one is
// ProblemSystemToMutable); an executor's declared inputs must all be among
// the dependent element's outputs; an executor's child_constraints
// (min_version, max_version, inclusive) are compared as strict semver. A
// version that is not strict semver (or a number rather than a string) is
// always a problem; it never passes as "no constraint".
//
// # Environment
//
// Engine.Plan builds the environment laid over the target's own, lowest
// first:
//
//  1. the project's .env (KEY=VALUE, quotes, comments, export, ${VAR});
//  2. each element's env_config, from the primitive up to the tool, so
//     for the same key the tool's value wins over its runtime's, and a
//     nearer runtime's over a farther one's;
//  3. the active anchor's env_paths, prepended/appended to the result;
//  4. the parameters as <param_env><NAME> variables when the config sets
//     param_env (the bash runtime uses REX_PARAM_).
//
// Values may use ${VAR} and ${VAR:-default}, expanded against the
// environment built so far and then the target's. An interpreter
// (local_binary with search_paths, search_roots and candidates,
// system_binary, or command) is resolved on the target through the Target
// interface and sets its var; a var already set in .env pins it.
//
// # Templating
//
// Config strings are templates. Pass 1 replaces ${VAR} from the resolved
// environment; pass 2 replaces {name} with execution context values
// (tool_path, tool_dir, tool_parent, tool_id, project_path, user_space,
// system_space, anchor_path, runtime_lib, runtime_dir), scalar config values
// (which may refer to each other, resolved until stable, at most 3 rounds)
// and parameters. Parameter values are inserted verbatim and never scanned
// again: "${SECRET}" in a parameter stays "${SECRET}". A parameter never
// replaces a config value: one named like a config key of any element of
// the chain, a primitive config key (command, args, input_data, cwd,
// timeout, param_env) or a context key stays in params_json only. The
// parameters travel as JSON on stdin ({params_json} may appear only in
// input_data).
//
// The command is an argv. The planner reads it the way the program it
// starts parses it (argScanner: shells, the common interpreters, awk, sed,
// wrappers such as env, sudo, nice and timeout, and the shell builtins
// that run code: eval, ., source, trap), and decides for every
// argument and for stdin what a substituted value becomes:
//
//   - the program (argv[0], a wrapper's program, a shell's or an
//     interpreter's script or module) and the options before it: no
//     parameter text;
//   - the command line of a shell (the first operand after its options
//     when -c is among them, wherever -c and -- sit), and stdin when a
//     shell reads its commands from there (sh -s, or sh with no script):
//     every substituted value is single-quoted as one word, and a
//     placeholder where a single-quoted word is not one word (inside
//     quotes, backquotes, $((...)), a comment or a here-document) is
//     an error; each simple command of the line is read as an argv by
//     the same argScanner, so a placeholder that names its program
//     (after nohup, env, exec, ... too), an option of a program rex
//     knows, or code (eval, ., trap, sh -c, python -c) is an error;
//   - program text of an interpreter (python -c, node -e, awk's program,
//     and stdin when the interpreter has no script): no parameter text;
//   - anything else is data, inserted verbatim.
//
// The parameters are validated against the tool's config_schema with a
// JSON Schema validator (draft 2020-12 by default; every keyword, formats
// included), after --param values are converted to the declared types and
// defaults are filled in. A schema that does not compile, or that refers to
// another document, makes the tool unusable.
//
// # Caches and trace
//
// Metadata is cached per file and content hash. A cached chain is reused
// only if, for every id in it, the set of candidate files in every space is
// unchanged and the winning file's content hash is the same, so editing a
// file or adding one that would shadow an element both invalidate it. A
// *Trace, when requested, records each decision (cache, resolve with what
// was shadowed, verify_integrity with content hashes, validate, interpreter,
// anchor, resolve_env per contributing element, params, template,
// config_resolve, ship); WriteText renders it for --trace.
//
// # Running elsewhere
//
// Plan returns the argv, env, cwd and stdin, and the files that must exist
// on the target (the tool, files runtimes list such as the python/function
// shim, and the anchor's dependencies) with their hashes. With
// PlanRequest.TargetRoot set, every path in the plan refers to
// TargetRoot/project/..., TargetRoot/user/... and TargetRoot/system/...,
// where the caller places ShipFile.Local at ShipFile.Target before calling
// Run. System-space files are written out under Options.SystemDir so they
// have a local path.
package chain
