package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print rex's version",
		Example: `  rex version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "rex %s\n", version.Version)
			return err
		},
	}
}
