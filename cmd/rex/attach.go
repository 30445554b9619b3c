package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newAttachCmd(e *env) *cobra.Command {
	var spec commands.AttachSpec
	cmd := &cobra.Command{
		Use:   "attach TARGET [-- CMD [ARG...]]",
		Short: "An interactive terminal on one target; ctrl+] closes it",
		Long: `Open a terminal on one target in this one: the login shell, or CMD.
ctrl+] closes the remote terminal, ending what runs in it, and hands this
one back (the console's /attach keeps terminals running). The exit status is
the remote program's, 0 after ctrl+].`,
		Example: `  rex attach web1
  rex attach db1 -- top -d 1`,
		ValidArgsFunction: completeTargets(e, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(cmd.Flags(), args); err != nil {
				return helpOr(cmd, err)
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			e.holdsTerminal.Store(true)
			return commands.Attach(cmd.Context(), app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}
