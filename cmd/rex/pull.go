package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newPullCmd(e *env) *cobra.Command {
	var spec commands.PullSpec
	cmd := &cobra.Command{
		Use:   "pull REMOTE_DIR LOCAL_DIR TARGET",
		Short: "Bring a tree back from a target, merged with local changes",
		Long: `Bring REMOTE_DIR on TARGET into LOCAL_DIR, three-way merged against what
was last synced: local edits are kept, and a file changed on both sides is
reported as a conflict with the target's version written beside it.`,
		Example:           `  rex pull /srv/www ./site web1`,
		ValidArgsFunction: completeTargets(e, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.Pull(cmd.Context(), app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}
