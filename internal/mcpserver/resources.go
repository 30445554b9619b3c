package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/devices"
	"github.com/rexconsole/rex/internal/commands"
	"github.com/rexconsole/rex/internal/toolset"
)

// The resources' addresses.
const (
	DevicesURI = "rex://devices"
	// FileTemplate reads a file of one host. {+path} is RFC 6570's
	// reserved expansion: the path keeps its slashes
	// (rex://target/web1/file//etc/hosts), and a client that encodes them
	// (rex://target/web1/file/%2Fetc%2Fhosts) is understood too. The path
	// is as the file tools take it: absolute, or under the remote home
	// (relative or ~/).
	FileTemplate = "rex://target/{name}/file/{+path}"
	filePrefix   = "rex://target/"
)

// A resource does what a tool does, so it is served only with that tool:
// --allow that leaves the tool out leaves the resource out too, or a
// client denied read would read files through rex://target/H/file/P.
// --read-only hides neither (read and targets change nothing).
var resourceTools = []struct{ prefix, tool, what string }{
	{DevicesURI, Targets, "the device registry comes"},
	{filePrefix, toolset.Read, "file resources come"},
}

// resourceRefusal says why uri is not served here, or "".
func (s *Server) resourceRefusal(uri string) string {
	for _, r := range resourceTools {
		if strings.HasPrefix(uri, r.prefix) && !slices.Contains(s.names, r.tool) {
			return fmt.Sprintf("%s is not served: rex mcp runs with --allow %s and %s with the %s tool; add %s to --allow",
				uri, strings.Join(s.opts.Allow, ","), r.what, r.tool, r.tool)
		}
	}
	return ""
}

// refuseResources answers a read of a resource left out by --allow with
// an error that names the flag, where the SDK would only say it is not
// found.
func (s *Server) refuseResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "resources/read" {
			if p, ok := req.GetParams().(*mcp.ReadResourceParams); ok {
				if why := s.resourceRefusal(p.URI); why != "" {
					return nil, resourceError(errors.New(why))
				}
			}
		}
		return next(ctx, method, req)
	}
}

func (s *Server) addResources() {
	s.srv.AddReceivingMiddleware(s.refuseResources)
	if s.resourceRefusal(DevicesURI) == "" {
		s.addDevices()
	}
	if s.resourceRefusal(filePrefix) == "" {
		s.addFiles()
	}
}

func (s *Server) addDevices() {
	s.srv.AddResource(&mcp.Resource{
		URI:         DevicesURI,
		Name:        "devices",
		Title:       "rex devices and groups",
		Description: "The device registry (devices.json): every device with its address, groups and description, and every group with its members, as rex device list --json prints them.",
		MIMEType:    "application/json",
	}, s.readDevices)
}

func (s *Server) addFiles() {
	s.srv.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: FileTemplate,
		Name:        "file",
		Title:       "A file on a host",
		Description: "A file of one host of the current target (up to 1 MiB), read through rexd within its roots: " +
			"rex://target/web1/file//etc/hosts, rex://target/local/file/notes.txt (under the home directory).",
	}, s.readFile)
}

func (s *Server) readDevices(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	reg, err := s.opts.Store.Load()
	if err != nil {
		return nil, resourceError(err)
	}
	b, err := commands.RegistryJSON(reg)
	if err != nil {
		return nil, resourceError(err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: DevicesURI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// parseFileURI splits rex://target/NAME/file/PATH.
func parseFileURI(uri string) (name, path string, err error) {
	rest, ok := strings.CutPrefix(uri, filePrefix)
	if !ok {
		return "", "", fmt.Errorf("%s is not a rex file address (%s)", uri, FileTemplate)
	}
	name, path, ok = strings.Cut(rest, "/file/")
	if !ok || name == "" || path == "" {
		return "", "", fmt.Errorf("%s names no host or no path; write %s", uri, FileTemplate)
	}
	if name, err = url.PathUnescape(name); err == nil {
		path, err = url.PathUnescape(path)
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: %v", uri, err)
	}
	return name, path, nil
}

func (s *Server) readFile(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, path, err := parseFileURI(uri)
	if err != nil {
		return nil, resourceError(err)
	}
	se, err := s.session(req.Session, req.ClientInfo())
	if err != nil {
		return nil, resourceError(err)
	}
	// The host is the client's word: never a ^FILE read here.
	if err := clientTarget(name); err != nil {
		return nil, resourceError(err)
	}
	// Files are read where the tools run: on the hosts of the current
	// target, unless the client may change the target anyway.
	if !s.opts.AllowRetarget {
		target, _, err := se.route(ctx)
		if err != nil {
			return nil, resourceError(err)
		}
		hosts, err := s.hostsOf(target)
		if err != nil {
			return nil, resourceError(err)
		}
		if !slices.Contains(hosts, name) {
			return nil, resourceError(fmt.Errorf("%s is not a host of the target %s (%s); files are read only where the tools run", name, target, devices.Fold(hosts)))
		}
	}
	f, err := se.ts.ReadFile(ctx, name, path)
	if err != nil {
		return nil, resourceError(err)
	}
	if f.Truncated {
		return nil, resourceError(fmt.Errorf("%s:%s is %s, more than the 1 MiB a resource holds; use the read tool with offset and limit, or grep",
			name, f.Path, commands.HumanBytes(f.Size)))
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: "text/plain", Text: f.Text}
	if f.Binary {
		c.MIMEType, c.Text, c.Blob = "application/octet-stream", "", f.Data
	}
	c.Meta = mcp.Meta{"rex/host": f.Host, "rex/path": f.Path}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{c}}, nil
}

// resourceError is a failed read as the protocol has it (resources have
// no error results): one sentence.
func resourceError(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
}
