// Command mcpserver is mcptest.Server on stdio, for tests.
package main

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/internal/mcptest"
)

func main() {
	if err := mcptest.Server().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
