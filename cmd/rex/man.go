package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/internal/version"
)

// The man page is written here from the command tree, in plain roff (man
// macros): the generator fang offers (mango) prints shorthand flags as
// "--x" and escapes neither hyphens nor lines that start with a quote.

// manSections are what rex(1) says beyond its commands and flags.
var manSections = []struct{ name, text string }{
	{"TARGETS", `TARGETS is a comma-separated list of: device names; group names; all (every device); local (this machine); globs over device names (web-*); ranges (node[1-16], node[01-16], n[1,3,5-7]); hosts that are not registered ([user@]host[:port], [user@][ipv6]:port, ssh://host); explicit Host aliases of ~/.ssh/config, by their bare name.

!NAME, !GLOB and !^FILE leave targets out, wherever they are written; -x NAMES does the same for every name it lists. ^FILE reads one target per line (# starts a comment); a bare word there that names nothing registered is a host name, except in an exclusion, where it must name a device, a group or a chosen host, so that a typo fails.

An unknown bare name is an error that suggests the closest names: a typo never turns into a connection to another machine.`},
	{"OUTPUT", `rex run prints each output line as it completes, prefixed by its target: "web1: " for stdout and "web1! " for stderr, names padded to one width. A line longer than 64 KiB is printed in pieces of 64 KiB (cut before a UTF-8 character that straddles the size); every piece after the first has the continuation mark "web1:+" (or "web1!+") in place of "web1: ", so a line can be joined again: drop the mark and the newline before it.

Then, on stderr, one line per target that did not exit 0, in target order ("h2! exit 1", "h3! timed out after 1s", "h4! unreachable: ...", "h5! cancelled", "h6! skipped: ..."), and the summary line ("rex: 3 ok, 1 failed in 2.1s"). -q drops the summary and keeps those lines.

--gather prints identical outputs once under the folded list of their targets (h[1-3,7]); --json prints one JSON object per event per line; --outdir DIR writes DIR/<target>.out and DIR/<target>.err, each whole once its target ends.`},
	{"EXIT STATUS", `rex run exits 0 when every target exited 0; 255 when any target could not be reached (or its connection was lost while the command ran); else the highest exit status of a remote command (1 at least for a timeout, a signal or a skipped target). ctrl+c (SIGINT) stops every remote command and exits 130; SIGTERM, 143. A usage error exits 2; any other failure, 1. rex device check, prepare and clean exit 255 when a target could not be reached (connect, host key, login), 1 when a reached target failed.`},
	{"ENVIRONMENT", `Every command rex runs gets REX_TARGET (the target's name) and REX_GROUP (the group TARGETS chose it through; empty when it was named alone).

NO_COLOR turns colour off. XDG_CONFIG_HOME, XDG_CACHE_HOME and XDG_STATE_HOME move rex's directories. SSH_AUTH_SOCK is the ssh-agent rex uses.`},
	{"FILES", `~/.config/rex/devices.json: the device registry, which may be edited by hand.
~/.ssh/config, ~/.ssh/known_hosts: read (and known_hosts written) as OpenSSH does; StrictHostKeyChecking yes, ask and accept-new are honoured, a changed host key is always refused.`},
	{"SEE ALSO", `ssh(1), ssh_config(5), pdsh(1), clush(1)`},
}

func newManCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "man",
		Short: "Print rex's manual page (roff); man -l <(rex man) reads it",
		Example: `  rex man > rex.1 && man -l rex.1
  man -l <(rex man)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return writeMan(cmd.OutOrStdout(), cmd.Root())
		},
	}
}

// writeMan writes rex(1) for the tree under root.
func writeMan(w io.Writer, root *cobra.Command) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH REX 1 \"\" %s \"rex manual\"\n", quoteArg("rex "+version.Version))
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "rex \\- %s\n", roffText(strings.ToLower(root.Short[:1])+root.Short[1:]))
	b.WriteString(".SH SYNOPSIS\n")
	b.WriteString(".nf\n")
	fmt.Fprintf(&b, "\\fBrex\\fR\n")
	walk(root, func(c *cobra.Command) {
		if c != root {
			fmt.Fprintf(&b, "\\fB%s\\fR%s\n", roffText(c.CommandPath()), roffText(strings.TrimPrefix(c.Use, c.Name())))
		}
	})
	b.WriteString(".fi\n")
	b.WriteString(".SH DESCRIPTION\n")
	paragraphs(&b, root.Long)
	if root.HasAvailableLocalFlags() {
		b.WriteString(".PP\nOptions of rex itself:\n")
		flags(&b, root.LocalFlags())
	}
	b.WriteString(".SH COMMANDS\n")
	walk(root, func(c *cobra.Command) {
		if c == root {
			return
		}
		fmt.Fprintf(&b, ".SS %s\n", quoteArg(c.CommandPath()+strings.TrimPrefix(c.Use, c.Name())))
		if c.Long != "" {
			paragraphs(&b, c.Long)
		} else {
			paragraphs(&b, c.Short+".")
		}
		if c.HasAvailableLocalFlags() {
			flags(&b, c.LocalFlags())
		}
		if c.Example != "" {
			b.WriteString(".PP\nExamples:\n.PP\n.RS 4\n.nf\n")
			for _, l := range strings.Split(strings.TrimRight(c.Example, "\n"), "\n") {
				b.WriteString(roffLine(strings.TrimSpace(l)) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
		}
	})
	for _, s := range manSections {
		fmt.Fprintf(&b, ".SH %s\n", quoteArg(s.name))
		paragraphs(&b, s.text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// walk visits c and its visible subcommands, depth first, in order.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	if c.Hidden || c.Name() == "help" {
		return
	}
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// paragraphs writes text whose paragraphs are separated by blank lines;
// single line breaks inside a paragraph are only wrapping.
func paragraphs(b *strings.Builder, text string) {
	for i, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		lines := strings.Split(p, "\n")
		for _, l := range lines {
			b.WriteString(roffLine(strings.TrimSpace(l)) + "\n")
		}
	}
}

// flags writes a command's flags as tagged paragraphs: "-x, --exclude NAMES".
func flags(b *strings.Builder, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		tag := "\\fB\\-\\-" + roffText(f.Name) + "\\fR"
		if f.Shorthand != "" {
			tag = "\\fB\\-" + roffText(f.Shorthand) + "\\fR, " + tag
		}
		if v := flagValueName(f); v != "" {
			tag += " \\fI" + roffText(v) + "\\fR"
		}
		fmt.Fprintf(b, ".TP\n%s\n%s\n", tag, roffLine(f.Usage))
	})
}

// flagValueName is the placeholder a flag's value is shown as.
func flagValueName(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return ""
	case "duration":
		return "D"
	case "int":
		return "N"
	case "port":
		return "PORT"
	case "N|P%":
		return "N|P%"
	}
	switch f.Name {
	case "target":
		return "TARGETS"
	case "exclude":
		return "NAMES"
	case "outdir":
		return "DIR"
	case "param":
		return "KEY=VALUE"
	case "key":
		return "PATH"
	}
	return strings.ToUpper(f.Name)
}

// roffText escapes text for roff: backslashes and hyphens.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffLine is roffText for a whole input line: one that starts with a
// control character ('.' or the quote) is guarded.
func roffLine(s string) string {
	s = roffText(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// quoteArg is a macro argument in double quotes.
func quoteArg(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `\(dq`) + `"`
}
