package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newRunCmd(e *env) *cobra.Command {
	var spec commands.RunSpec
	var resumable time.Duration
	cmd := &cobra.Command{
		Use:   "run TARGETS [flags] -- CMD [ARG...]",
		Short: "Run a command on many targets at once, output prefixed by host",
		Long: `Run a command on every target at once. Each output line is printed as it
completes, prefixed "host: " (stdout) or "host! " (stderr); a line longer
than 64 KiB goes in pieces, each after the first marked "host:+". Then, on
stderr, one line per target that did not exit 0 ("h2! exit 1", "h3! timed
out after 1s", "h4! unreachable: ...", "h5! cancelled") and a summary (-q
drops the summary). -N prints the output with no names: one target's bytes
as they come, stdout to stdout and stderr to stderr, as ssh does; several
targets' whole lines.

One command word with spaces or shell syntax runs through sh -c on the
target; several words are an argv that no shell interprets. stdin, when it
is not a terminal, goes to every target (--no-stdin keeps it). The command
gets REX_TARGET and REX_GROUP in its environment.

--batch, --canary and --max-fail roll over the targets instead of starting
them all at once.

Exit status: 0 when every target exited 0; 255 when any target could not be
reached; else the highest remote exit status. ctrl+c stops every remote
command and exits 130 (SIGTERM: 143).`,
		Example: `  rex run web -- uptime
  rex run 'db[1-3]' --gather -- 'df -h /var'
  rex run all,!web3 --json -- systemctl is-active nginx
  rex run -w web-* -x web9 -t 30s -- apt-get -y upgrade
  rex run ^hosts.txt --batch 2 --max-fail 1 -- ./upgrade.sh
  rex run web --canary 1 -- systemctl restart nginx
  rex run db1 -N -- pg_dump app > app.sql
  rex run web --resumable -- ./long-migration.sh
  tar c conf | rex run web -- 'tar x -C /etc/app'`,
		ValidArgsFunction: completeTargets(e, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := spec.Args(cmd.Flags(), args); err != nil {
				return helpOr(cmd, err)
			}
			if resumable < 0 {
				return helpOr(cmd, commands.Usagef("--resumable %s: use a duration such as 10m", resumable))
			}
			e.pool.ResumeGrace = resumable
			app, err := e.App()
			if err != nil {
				return err
			}
			// rex exits after the run: each target's connection closes
			// as soon as it is done, so open files follow --concurrency.
			spec.OneShot = true
			return commands.Run(cmd.Context(), app, e.io, spec)
		},
	}
	spec.Bind(cmd.Flags())
	cmd.Flags().DurationVar(&resumable, "resumable", 0, "open resumable sessions: a dropped connection is dialled again and resumed while the commands run on, for up to this long (10m when given alone; capped by rexd's resume_grace_ms)")
	cmd.Flags().Lookup("resumable").NoOptDefVal = "10m"
	return cmd
}
