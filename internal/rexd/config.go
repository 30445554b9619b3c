package rexd

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/rexconsole/rex/internal/protocol"
)

// Config is rexd's policy: limits, roots, shell permission and audit.
type Config struct {
	Limits protocol.Limits
	// Roots are the directories file operations and cwd are confined to.
	// Empty means the user's home directory.
	Roots      []string
	AllowShell bool
	// AllowCommands, when not empty, is the only programs (by base name or
	// full path) exec.start and pty.open may run.
	AllowCommands []string
	// AuditPath is the JSON-lines audit log; empty disables auditing.
	AuditPath string
	// CASDir is the object store of the cas.* methods; empty means
	// DefaultCASDir.
	CASDir string
	// KillGrace is how long a process group has between TERM and KILL.
	KillGrace time.Duration
	// GuardExe is the rexd executable, run as a guard (GuardFlag) that
	// stops this rexd's process groups should it be killed outright;
	// empty runs none.
	GuardExe string
	// MaxLine bounds one request line.
	MaxLine int
	// ResumeGrace is the longest resume grace a session may ask for
	// (resume_grace_ms); 0 turns resumable sessions off.
	ResumeGrace time.Duration
	// ResumeBuffer bounds the unacknowledged output a resumable session
	// keeps per process; past it the process blocks on its pipe.
	ResumeBuffer int64
	// SessionDir holds resumable sessions' sockets; empty means
	// DefaultSessionDir.
	SessionDir string
	// UsageDirs are the cache directories, in order, under which the
	// registry is kept through which the per-user limits
	// (max_concurrent_sessions, max_processes_per_user) count the user's
	// other rexd processes on the host (usage.go): the first that passes
	// the checks (not a symlink, this user's, 0700) is used. None counts
	// this process only. The rexd command sets DefaultUsageDirs.
	UsageDirs []string
	// Warn, when set, is told what does not work as configured but does
	// not stop rexd (a registry that cannot be used).
	Warn func(error)
	// Version and BuildHash are reported by session.open.
	Version   string
	BuildHash string
}

// DefaultLimits are the REXD v1 spec's opinionated defaults.
func DefaultLimits() protocol.Limits {
	return protocol.Limits{
		DefaultTimeoutMS:       30_000,
		HardTimeoutMS:          300_000,
		MaxOutputBytes:         1 << 20,
		MaxFileReadBytes:       1 << 20,
		MaxProcessesPerSession: 8,
		MaxConcurrentSessions:  16,
		MaxProcessesPerUser:    128,
	}
}

// DefaultConfig returns the spec's defaults with auditing to the user's
// state directory.
func DefaultConfig() Config {
	return Config{
		Limits:     DefaultLimits(),
		AllowShell: true,
		AuditPath:  DefaultAuditPath(),
		KillGrace:  time.Second,
		MaxLine:    protocol.DefaultMaxLine,

		ResumeGrace:  DefaultResumeGrace,
		ResumeBuffer: DefaultResumeBuffer,
	}
}

// DefaultAuditPath is $XDG_STATE_HOME/rexd/audit.log, else
// ~/.local/state/rexd/audit.log, else empty.
func DefaultAuditPath() string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "rexd", "audit.log")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".local", "state", "rexd", "audit.log")
}

// SystemConfigPath is read when no --config is given and it exists.
const SystemConfigPath = "/etc/rexd/config.toml"

type fileConfig struct {
	Server struct {
		Stdio    *bool  `toml:"stdio"`
		LogLevel string `toml:"log_level"`
	} `toml:"server"`
	Limits struct {
		DefaultTimeoutMS       *int64 `toml:"default_timeout_ms"`
		HardTimeoutMS          *int64 `toml:"hard_timeout_ms"`
		MaxOutputBytes         *int64 `toml:"max_output_bytes"`
		MaxFileReadBytes       *int64 `toml:"max_file_read_bytes"`
		MaxProcessesPerSession *int64 `toml:"max_processes_per_session"`
		MaxConcurrentSessions  *int64 `toml:"max_concurrent_sessions"`
		MaxProcessesPerUser    *int64 `toml:"max_processes_per_user"`
		KillGraceMS            *int64 `toml:"kill_grace_ms"`
		ResumeGraceMS          *int64 `toml:"resume_grace_ms"`
		ResumeBufferBytes      *int64 `toml:"resume_buffer_bytes"`
	} `toml:"limits"`
	Security struct {
		AllowShell    *bool    `toml:"allow_shell"`
		AllowCommands []string `toml:"allow_commands"`
		AllowedRoots  []struct {
			Path string `toml:"path"`
		} `toml:"allowed_roots"`
	} `toml:"security"`
	Audit struct {
		Enabled *bool  `toml:"enabled"`
		Path    string `toml:"path"`
	} `toml:"audit"`
}

// LoadFile applies a TOML configuration file (the spec's format) on top of
// cfg. Unknown keys are an error so that a typo never silently loosens
// policy.
func (cfg *Config) LoadFile(path string) error {
	var fc fileConfig
	md, err := toml.DecodeFile(path, &fc)
	if err != nil {
		return fmt.Errorf("read config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return fmt.Errorf("read config %s: unknown key %q; remove it or fix its spelling", path, und[0].String())
	}
	set := func(dst *int64, v *int64, name string) error {
		if v == nil {
			return nil
		}
		if *v < 0 {
			return fmt.Errorf("read config %s: %s must not be negative", path, name)
		}
		*dst = *v
		return nil
	}
	l := &cfg.Limits
	for _, f := range []struct {
		dst  *int64
		v    *int64
		name string
	}{
		{&l.DefaultTimeoutMS, fc.Limits.DefaultTimeoutMS, "default_timeout_ms"},
		{&l.HardTimeoutMS, fc.Limits.HardTimeoutMS, "hard_timeout_ms"},
		{&l.MaxOutputBytes, fc.Limits.MaxOutputBytes, "max_output_bytes"},
		{&l.MaxFileReadBytes, fc.Limits.MaxFileReadBytes, "max_file_read_bytes"},
		{&l.MaxProcessesPerSession, fc.Limits.MaxProcessesPerSession, "max_processes_per_session"},
		{&l.MaxConcurrentSessions, fc.Limits.MaxConcurrentSessions, "max_concurrent_sessions"},
		{&l.MaxProcessesPerUser, fc.Limits.MaxProcessesPerUser, "max_processes_per_user"},
	} {
		if err := set(f.dst, f.v, f.name); err != nil {
			return err
		}
	}
	if v := fc.Limits.KillGraceMS; v != nil {
		cfg.KillGrace = time.Duration(*v) * time.Millisecond
	}
	if v := fc.Limits.ResumeGraceMS; v != nil {
		if *v < 0 {
			return fmt.Errorf("read config %s: resume_grace_ms must not be negative", path)
		}
		cfg.ResumeGrace = time.Duration(*v) * time.Millisecond
	}
	if v := fc.Limits.ResumeBufferBytes; v != nil {
		if *v <= 0 {
			return fmt.Errorf("read config %s: resume_buffer_bytes must be positive", path)
		}
		cfg.ResumeBuffer = *v
	}
	if fc.Security.AllowShell != nil {
		cfg.AllowShell = *fc.Security.AllowShell
	}
	cfg.AllowCommands = append(cfg.AllowCommands, fc.Security.AllowCommands...)
	for _, r := range fc.Security.AllowedRoots {
		if r.Path == "" {
			return fmt.Errorf("read config %s: an allowed_roots entry has no path", path)
		}
		cfg.Roots = append(cfg.Roots, r.Path)
	}
	if fc.Audit.Path != "" {
		cfg.AuditPath = fc.Audit.Path
	}
	if fc.Audit.Enabled != nil && !*fc.Audit.Enabled {
		cfg.AuditPath = ""
	}
	return nil
}
