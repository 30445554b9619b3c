package fanout

import (
	"context"
	"fmt"
	"slices"

	"github.com/rexconsole/rex/internal/protocol"
	"github.com/rexconsole/rex/internal/rexclient"
	"github.com/rexconsole/rex/internal/version"
)

// LocalConnector reaches the operator's own machine by running
// `rexdPath --stdio args...` as a subprocess.
func LocalConnector(rexdPath string, args ...string) ConnectorFunc {
	start := func(ctx context.Context, args ...string) (*Conn, error) {
		c, err := rexclient.StartLocal(ctx, rexdPath, args...)
		if err != nil {
			return nil, fmt.Errorf("start local rexd: %w", err)
		}
		s, err := c.OpenSession(ctx, protocol.SessionOpenParams{ClientName: "rex", ClientVersion: version.Version, RequestedCapabilities: []string{protocol.CapOutputRaw}})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("local rexd: %w", err)
		}
		return &Conn{Session: s, Closer: c}, nil
	}
	return func(ctx context.Context, t Target) (*Conn, error) {
		conn, err := start(ctx, args...)
		if err != nil {
			return nil, err
		}
		// A bulk lane is another local rexd, at a lower CPU priority.
		conn.OpenLane = func(ctx context.Context) (*Conn, error) {
			return start(ctx, append(slices.Clip(args), "--nice", LaneNice)...)
		}
		return conn, nil
	}
}

// LaneNice is the nice value of a bulk lane's rexd (rexd --nice): a
// transfer yields the CPU to interactive work. sshx.LaneNice is the same.
const LaneNice = "10"

// OperatorLimits are the rexd flags rex passes to the daemons it starts: an
// operator's own commands are not held to the agent-safety defaults of the
// spec (1 MiB output, 30 s), only to what the operator asks for.
func OperatorLimits() []string {
	return []string{
		"--limit", "default_timeout_ms=0",
		"--limit", "hard_timeout_ms=0",
		"--limit", "max_output_bytes=0",
		"--limit", "max_processes_per_session=1024",
		// The per-user limits count across every rexd of the user on the
		// host (all consoles, scripts and lanes of the operator).
		"--limit", "max_processes_per_user=4096",
		"--limit", "max_concurrent_sessions=256",
	}
}
