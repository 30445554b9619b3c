package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newPushCmd(e *env) *cobra.Command {
	var spec commands.PushSpec
	cmd := &cobra.Command{
		Use:   "push LOCAL_DIR REMOTE_DIR TARGETS",
		Short: "Send a tree to many targets; only what each lacks crosses the wire",
		Long: `Send the tree LOCAL_DIR to REMOTE_DIR on every target, through rex's
content-addressed store: a file a target already has is not sent again.
A relative REMOTE_DIR starts in the target user's home.`,
		Example: `  rex push ./site /srv/www web
  rex push ./conf ~/.config/app 'edge[1-8]'`,
		ValidArgsFunction: completeTargets(e, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(args); err != nil {
				return err
			}
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
