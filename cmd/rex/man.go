package main

import (
	"fmt"

	mcobra "github.com/muesli/mango-cobra"
	"github.com/muesli/roff"
	"github.com/spf13/cobra"
)

// manSections are what rex(1) says beyond its commands and flags.
var manSections = [][2]string{
	{"TARGETS", `TARGETS is a comma-separated list of device names, group names, all, local,
glob patterns (web-*), ranges (node[1-16], node[01-16], n[1,3,5-7]), and hosts
that are not registered ([user@]host[:port], [user@][ipv6]:port, ssh://host).`},
	{"EXIT STATUS", `rex run exits 0 when every target exited 0; 255 when any target could not be
reached; else the highest exit status of a remote command. 2 is a usage error,
1 any other failure.`},
	{"FILES", `~/.config/rex/devices.json  the device registry
~/.ssh/config, ~/.ssh/known_hosts  read as OpenSSH reads them`},
}

func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "man",
		Short: "Print rex's manual page (roff); man -l <(rex man) reads it",
		Example: `  rex man > rex.1 && man -l rex.1
  man -l <(rex man)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			page, err := mcobra.NewManPage(1, cmd.Root())
			if err != nil {
				return err
			}
			for _, s := range manSections {
				page = page.WithSection(s[0], s[1])
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), page.Build(roff.NewDocument()))
			return err
		},
	}
}
