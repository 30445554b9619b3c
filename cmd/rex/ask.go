package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/agent"
)

func newAskCmd(e *env) *cobra.Command {
	var spec agent.AskSpec
	cmd := &cobra.Command{
		Use:   "ask [--target TARGETS] [--yes | --allow TOOL...] [--json] -- PROMPT",
		Short: "Ask the agent to do something on a target, once, from a shell",
		Long: `Ask the agent (config.toml's [agent] model) to do something on the targets and
print its transcript: the answer, and each tool call with the hosts it ran on
and its summary line. The tools reach the targets through rexd, audited as
rex-agent. Read-only tools (read, list, glob, grep) run freely; bash, write,
edit and chain tools are refused unless --yes, --allow TOOL or the config's
[agent] allow prefixes let them run.

Exit status: 0 when the agent finished, 1 when it failed or a call was
refused, 130 when interrupted.`,
		Example: `  rex ask -- which services failed on this machine
  rex ask -w web --allow bash -- why is nginx slow
  rex ask -w db --json -- how full are the disks | jq .`,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return helpOr(cmd, err)
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return agent.Ask(cmd.Context(), agent.AskEnv{App: app, Paths: e.paths, IO: e.io}, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}
