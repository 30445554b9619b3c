package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/rexconsole/rex/internal/commands"
)

// completeTargets completes the TARGETS argument at position pos (0-based
// count of positionals before it; -1 for a flag's value): device and
// group names, after the last comma of a list.
func completeTargets(e *env, pos int) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if pos >= 0 && len(args) != pos {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		s, err := e.Setup()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names, err := commands.TargetNames(s.Store)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		head := ""
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			head = toComplete[:i+1]
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(head+n, toComplete) {
				out = append(out, head+n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeTools completes a tool id.
func completeTools(e *env) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		app, err := e.App()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ids, _ := commands.ToolIDs(app)
		out := make([]cobra.Completion, 0, len(ids))
		for _, id := range ids {
			if strings.HasPrefix(id, toComplete) {
				out = append(out, id)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
