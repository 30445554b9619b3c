package mcpcall

import (
	"os"
	"testing"

	"github.com/rexconsole/rex/internal/mcptest"
)

// TestMain removes the test MCP server mcptest.Binary built.
func TestMain(m *testing.M) {
	code := m.Run()
	mcptest.Close()
	os.Exit(code)
}
