package main

import (
	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

func newSecretCmd(e *env) *cobra.Command {
	cmd := parentCmd(&cobra.Command{
		Use:   "secret",
		Short: "Keep secrets that tools get as environment variables",
		Long: `Secrets are named values (tokens, passwords) kept in the OS keyring, or in an
age-encrypted file under ~/.config/rex when no keyring answers. A tool or a
device declares the names it needs (secrets: [GITHUB_TOKEN]); the process gets
each as an environment variable, and any echo of a value in output shows as ***.
The encrypted file's passphrase is asked on the terminal, or read from
REX_SECRETS_PASSPHRASE; REX_SECRETS_BACKEND=keyring|file forces a store.`,
		Example: `  rex secret set GITHUB_TOKEN
  gh auth token | rex secret set GITHUB_TOKEN
  rex secret list
  rex secret rm GITHUB_TOKEN`,
	})
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Store a secret; the value is typed (echo off) or read from stdin, never taken from the command line",
		Example: `  rex secret set GITHUB_TOKEN
  gh auth token | rex secret set GITHUB_TOKEN`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return commands.Secret(nil, e.io, append([]string{"set"}, args...))
			}
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.SecretSet(app, e.io, args[0])
		},
	}
	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the secrets' names (never their values)",
		Example: `  rex secret list`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.SecretList(app, e.io)
		},
	}
	rm := &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove", "delete"},
		Short:   "Remove a secret",
		Example: `  rex secret rm GITHUB_TOKEN`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			app, err := e.App()
			if err != nil {
				return err
			}
			return commands.SecretRemove(app, e.io, args[0])
		},
	}
	cmd.AddCommand(set, list, rm)
	return cmd
}
