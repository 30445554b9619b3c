package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newRunCmd(e *env) *cobra.Command {
	var spec commands.RunSpec
	cmd := &cobra.Command{
		Use:   "run TARGETS [flags] -- CMD [ARG...]",
		Short: "Run a command on many targets at once, output prefixed by host",
		Long: `Run a command on every target at once. Each output line is printed as it
completes, prefixed "host: " (stdout) or "host! " (stderr); a summary goes to
stderr. One command word with spaces or shell syntax runs through sh -c on
the target; several words are an argv that no shell interprets.

Exit status: 0 when every target exited 0; 255 when any target could not be
reached; else the highest remote exit status.`,
		Example: `  rex run web -- uptime
  rex run 'db[1-3]' --gather -- 'df -h /var'
  rex run all --json -- systemctl is-active nginx
  rex run -w web-* -t 30s -- apt-get -y upgrade`,
		ValidArgsFunction: completeTargets(e, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(cmd.Flags(), args); err != nil {
				return helpOr(cmd, err)
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.Run(cmd.Context(), app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	return cmd
}
