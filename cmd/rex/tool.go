package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newToolCmd(e *env) *cobra.Command {
	cmd := parentCmd(&cobra.Command{
		Use:   "tool",
		Short: "List, inspect and run reusable tools through the executor chain",
		Long: `Tools are reusable commands found in the project's .ai/, the user's
~/.config/rex/.ai/ and rex's system space; the executor chain decides how each
runs on each target.`,
		Example: `  rex tool list
  rex tool show rex/ops/disk
  rex tool run rex/ops/disk --param threshold=80 --target web
  rex tool new my/hello --runtime python && rex tool check my/hello`,
	})
	cmd.AddCommand(newToolListCmd(e), newToolShowCmd(e), newToolRunCmd(e), newToolNewCmd(e), newToolCheckCmd(e))
	return cmd
}

func newToolNewCmd(e *env) *cobra.Command {
	var spec commands.ToolNewSpec
	cmd := &cobra.Command{
		Use:   "new ID",
		Short: "Write a working tool to start from, in the project (or --user) space",
		Example: `  rex tool new my/hello
  rex tool new ops/report --runtime python --user`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.ToolNew(app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}

func newToolCheckCmd(e *env) *cobra.Command {
	var spec commands.ToolCheckSpec
	return &cobra.Command{
		Use:               "check ID",
		Short:             "Check a tool without running it: chain, schema, templates, syntax",
		Example:           `  rex tool check my/hello`,
		ValidArgsFunction: completeTools(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.ToolCheck(cmd.Context(), app, e.io, spec)
		},
	}
}

func newToolListCmd(e *env) *cobra.Command {
	var spec commands.ToolListSpec
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the tools this directory can use (--all: runtimes and primitives too)",
		Example: "  rex tool list\n  rex tool list --all",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.ToolList(app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}

func newToolShowCmd(e *env) *cobra.Command {
	var spec commands.ToolShowSpec
	cmd := &cobra.Command{
		Use:               "show ID",
		Short:             "Show a tool's executor chain and whether it is valid",
		Example:           `  rex tool show ops/disk --trace`,
		ValidArgsFunction: completeTools(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.ToolShow(app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}

func newToolRunCmd(e *env) *cobra.Command {
	var spec commands.ToolRunSpec
	cmd := &cobra.Command{
		Use:   "run ID [--param KEY=VALUE]... [--target TARGETS]",
		Short: "Run a tool on its targets (local when none are named)",
		Example: `  rex tool run ops/disk --param path=/var
  rex tool run ops/restart -p unit=nginx -w web -x web3`,
		ValidArgsFunction: completeTools(e),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.ToolRun(cmd.Context(), app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}
