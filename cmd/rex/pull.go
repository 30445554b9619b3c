package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newPullCmd(e *env) *cobra.Command {
	var spec commands.PullSpec
	cmd := &cobra.Command{
		Use:   "pull REMOTE LOCAL TARGETS",
		Short: "Bring a directory back from targets, merged with local changes",
		Long: `Bring REMOTE on each target into LOCAL, three-way merged against what was
last synced between that target's REMOTE and this LOCAL: local edits are
kept, remote ones applied, and a file changed on both sides is merged line
by line or reported as a conflict (markers in the file, or the target's
version saved beside it as FILE.theirs). Every path the pull wrote is
listed: created (+), updated (~), merged (M), deleted (-). With several
targets each goes into LOCAL/<target>.

A push from LOCAL refuses to send unresolved conflicts until they are
resolved (or --force). --dry-run prints what the merge would write.

-w TARGETS names the targets as a flag (as rpdcp's -w); -x NAMES leaves
some out.`,
		Example: `  rex pull /srv/www ./site web1
  rex pull /etc/nginx ./configs web
  rex pull -w 'web[1-4]' /etc/nginx ./configs`,
		ValidArgsFunction: completeAfterPaths(e, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
			e.pool.NoLanes = true // one transfer, then exit: no console to keep responsive
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
