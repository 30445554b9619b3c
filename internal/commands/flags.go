package commands

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/internal/fanout"
)

// Flags are declared here, once, on a pflag.FlagSet: the command line
// (cmd/rex, cobra) binds them on its commands and the console's slash
// commands parse their words with the same sets (ParseFlags), so a flag
// means one thing in every verb and in both front ends.
//
// Letters mean one thing everywhere: -w TARGETS and -x exclusions as in
// pdsh and clush, -t the command's timeout, -f the fan-out, -q quiet.

// TargetFlags are the flags that choose targets.
type TargetFlags struct {
	// Target is --target TARGETS (-w), "" when not given.
	Target string
	// Exclude is every -x NAMES, each a TARGETS expression.
	Exclude []string
}

// Bind declares --target and --exclude.
func (f *TargetFlags) Bind(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Target, "target", "w", "", "the TARGETS to reach (devices, groups, globs, ranges, hosts)")
	f.BindExclude(fs)
}

// BindExclude declares --exclude alone, for verbs whose TARGETS is a
// positional argument.
func (f *TargetFlags) BindExclude(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&f.Exclude, "exclude", "x", nil, "leave out these NAMES (a TARGETS list; repeatable)")
}

// Words is args with -w's TARGETS, when given, as the last word, for a
// verb whose TARGETS is its last positional word (pdcp's -w): with -w,
// every word written is a path.
func (f *TargetFlags) Words(args []string) []string {
	if f.Target == "" {
		return args
	}
	return append(args, f.Target)
}

// pathWords is a push's or a pull's words with its TARGETS last: -w's
// when given (every word written is then a path), else current (a front
// end's current target) when only the two paths were written.
func (f *TargetFlags) pathWords(args []string, current string) []string {
	if f.Target == "" && len(args) == 2 && current != "" {
		return append(args, current)
	}
	return f.Words(args)
}

// Spec is TARGETS with the exclusions folded in as !NAME terms.
func (f *TargetFlags) Spec(targets string) string {
	if targets == "" {
		targets = f.Target
	}
	for _, x := range f.Exclude {
		for _, term := range splitTargets(x) {
			if term = strings.TrimSpace(term); term != "" {
				targets += ",!" + strings.TrimPrefix(term, "!")
			}
		}
	}
	return targets
}

// splitTargets splits a TARGETS list at the commas outside brackets
// (n[1,3] is one term).
func splitTargets(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// ReachFlags bound how targets are reached and how many at once.
type ReachFlags struct {
	// ConnectTimeout bounds dial, handshake and bootstrap per target;
	// 0 leaves it to ssh_config and the default.
	ConnectTimeout time.Duration
	// Concurrency is how many targets are in flight; 0 is the default.
	Concurrency int
}

// Bind declares --connect-timeout and --concurrency.
func (f *ReachFlags) Bind(fs *pflag.FlagSet) {
	BindConnectTimeout(fs, &f.ConnectTimeout)
	fs.VarP(positiveInt{&f.Concurrency}, "concurrency", "f", "reach at most N targets at once (default 64)")
}

// BindConnectTimeout declares --connect-timeout alone.
func BindConnectTimeout(fs *pflag.FlagSet, d *time.Duration) {
	fs.Var(durationValue{d}, "connect-timeout", "give up reaching a target after D (default: ssh_config's ConnectTimeout, else 10s)")
}

// BindTimeout declares --timeout (-t), the bound on the command itself.
func BindTimeout(fs *pflag.FlagSet, d *time.Duration) {
	fs.VarP(durationValue{d}, "timeout", "t", "stop the command after D (30s, 5m, or seconds); 0 never")
}

// BindJSON declares --json.
func BindJSON(fs *pflag.FlagSet, b *bool) {
	fs.BoolVar(b, "json", false, "print JSON for scripts")
}

// durationValue is a duration flag that also takes bare seconds (30).
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as 30s, 5m or 90")
	}
	*v.d = d
	return nil
}

func (durationValue) Type() string { return "duration" }

// positiveInt is an int flag that must be 1 or more.
type positiveInt struct{ n *int }

func (v positiveInt) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v positiveInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("want a positive number")
	}
	*v.n = n
	return nil
}

func (positiveInt) Type() string { return "int" }

// NewFlagSet is a flag set for the verb named name ("device add"), as
// both front ends parse it: flags may sit among positionals, -h/--help is
// declared, and errors come back rather than exiting.
func NewFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// ErrHelp is returned by ParseFlags when the words ask for help.
var ErrHelp = pflag.ErrHelp

// ParseFlags parses words with the flags bind declares and returns the
// positionals. It is how the console parses a slash command's words;
// cobra does the same for the command line with the same bind.
func ParseFlags(name string, words []string, bind func(*pflag.FlagSet)) ([]string, error) {
	fs := NewFlagSet(name)
	bind(fs)
	if err := fs.Parse(words); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, ErrHelp
		}
		return nil, FlagError("rex "+name, fs, err)
	}
	return fs.Args(), nil
}

// FlagError turns a pflag error into a usage error that names the command
// and suggests the closest flag.
func FlagError(command string, fs *pflag.FlagSet, err error) error {
	var (
		ne *pflag.NotExistError
		re *pflag.ValueRequiredError
		ie *pflag.InvalidValueError
		se *pflag.InvalidSyntaxError
	)
	switch {
	case errors.As(err, &ne):
		name, shown := ne.GetSpecifiedName(), "--"+ne.GetSpecifiedName()
		if short := ne.GetSpecifiedShortnames(); short != "" {
			shown = "-" + short
		}
		var names []string
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, "--"+f.Name) })
		hint := didYouMean(name, names...)
		if hint == "" {
			hint = "; " + command + " --help lists the flags"
		}
		return Usagef("unknown flag %s for %s%s", shown, command, hint)
	case errors.As(err, &re):
		return Usagef("flag --%s of %s needs a value", re.GetFlag().Name, command)
	case errors.As(err, &ie):
		f := ie.GetFlag()
		if f.Value.Type() == "bool" {
			return Usagef("flag --%s takes true or false, not %q", f.Name, ie.GetValue())
		}
		return Usagef("--%s %q: %v", f.Name, ie.GetValue(), errors.Unwrap(ie))
	case errors.As(err, &se):
		return Usagef("bad flag syntax %s for %s", se.GetSpecifiedFlag(), command)
	}
	return Usagef("%s: %v", command, err)
}

// helpAsked reports whether a -h/--help flag declared on fs was given.
func helpAsked(fs *pflag.FlagSet) bool {
	f := fs.Lookup("help")
	return f != nil && f.Value.String() == "true"
}

// BindQuiet declares -q/--quiet.
func BindQuiet(fs *pflag.FlagSet, b *bool) {
	fs.BoolVarP(b, "quiet", "q", false, "drop the summary line (the lines naming failed targets stay)")
}

// RollingFlags make a run roll over its targets instead of starting them
// all at once.
type RollingFlags struct {
	// Batch runs the targets this many at a time, in order.
	Batch int
	// Canary runs the first Canary targets alone, first.
	Canary int
	// MaxFail is "N" or "P%" (of the targets), "" for no limit.
	MaxFail maxFail
}

// Bind declares --batch, --canary and --max-fail.
func (f *RollingFlags) Bind(fs *pflag.FlagSet) {
	fs.Var(positiveInt{&f.Batch}, "batch", "run N targets at a time, in their order, each batch after the last ended")
	fs.Var(positiveInt{&f.Canary}, "canary", "run the first N targets alone first; go on only if all of them exit 0")
	fs.Var(&f.MaxFail, "max-fail", "stop starting targets once N (or P% of them) have failed; the rest are skipped")
}

// apply sets the rolling options of a run over n targets.
func (f *RollingFlags) apply(o *fanout.Options, n int) {
	o.Batch, o.Canary, o.MaxFail = f.Batch, f.Canary, f.MaxFail.count(n)
}

// Options are the fan-out options these flags ask for, for a run over n
// targets (the console's /run).
func (f *RollingFlags) Options(n int) fanout.Options {
	var o fanout.Options
	f.apply(&o, n)
	return o
}

// maxFail is a --max-fail value: a count, or a percentage of the targets.
type maxFail struct {
	n       int
	percent bool
}

func (m *maxFail) String() string {
	switch {
	case m.n == 0:
		return ""
	case m.percent:
		return strconv.Itoa(m.n) + "%"
	}
	return strconv.Itoa(m.n)
}

func (m *maxFail) Set(s string) error {
	v, pct := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || pct && n > 100 {
		return fmt.Errorf("want a number of targets (3) or a percentage of them (10%%)")
	}
	m.n, m.percent = n, pct
	return nil
}

func (m *maxFail) Type() string { return "N|P%" }

// count is the number of failures that stops a run over n targets: P% of
// n rounded up, at least 1.
func (m maxFail) count(n int) int {
	if !m.percent {
		return m.n
	}
	return max(1, (m.n*n+99)/100)
}
