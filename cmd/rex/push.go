package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newPushCmd(e *env) *cobra.Command {
	var spec commands.PushSpec
	cmd := &cobra.Command{
		Use:   "push SRC... DEST TARGETS",
		Short: "Send files and directories to many targets: adds and updates, only what each lacks crosses the wire",
		Long: `Send SRC to DEST on every target. One directory: its contents go into DEST.
One file: it becomes DEST, or goes into it when DEST ends in / or is a
directory there. Several: each goes into DEST under its own name.

A push adds and updates: each file is replaced atomically (a temporary file
beside it, then a rename), DEST keeps its inode, owner and mode, and nothing
the source lacks is removed. --delete removes it too, and lists every path
removed; --atomic builds the tree beside DEST and swaps it in whole (DEST is
replaced, with no moment it is missing); --dry-run prints what would be
added (+), updated (~) and deleted (-) and changes nothing. Modes travel
with the files.

A relative DEST starts in the target user's home; any path the login user
may write works, unless the device's "roots" narrow it. --sudo writes as
root (or the device's become_user): sudo -n, and the password asked once
when a target's sudo wants one. A file a target already holds, in DEST or
elsewhere, is not sent again.

-w TARGETS names the targets as a flag, as pdcp's -w: then the last word is
DEST. -x NAMES leaves some out.`,
		Example: `  rex push ./site /srv/www web
  rex push --delete ./site /srv/www web --dry-run
  rex push --sudo nginx.conf /etc/nginx/conf.d/ 'edge[1-8]'
  rex push --atomic build/ /opt/app/current app
  rex push ./site /srv/www web -x web3
  rex push -w 'web[1-4]' a.conf b.conf /etc/app/`,
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
			return commands.Push(cmd.Context(), app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}

// completeAfterPaths completes files for the first n words (the paths of
// push and pull) and TARGETS after them: the last word may be either.
func completeAfterPaths(e *env, n int) cobra.CompletionFunc {
	targets := completeTargets(e, -1)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) < n {
			return nil, cobra.ShellCompDirectiveDefault
		}
		return targets(cmd, args, toComplete)
	}
}
