package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/rexconsole/rex/devices"
)

// targetsInput is the (empty) input of targets.
type targetsInput struct{}

var targetsTool = &mcp.Tool{
	Name:  Targets,
	Title: "List devices and groups",
	Description: "Lists the devices and groups rex knows and says which target the tools run on now and why " +
		"(the operator's --target, the console's /target, or local). It reaches no host.",
	Annotations: &mcp.ToolAnnotations{Title: "List devices and groups", ReadOnlyHint: true, IdempotentHint: true,
		DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
}

// useTargetInput is the input of use_target.
type useTargetInput struct {
	Target string `json:"target" jsonschema:"The TARGETS to run on from now on: a device, a group, local, a comma-separated list, a glob (web-*) or a range (node[1-4])."`
}

var useTargetTool = &mcp.Tool{
	Name:  UseTarget,
	Title: "Change the target",
	Description: "Changes the target every following call runs on, for this client only. The operator allowed it " +
		"(rex mcp --allow-retarget); call targets first to see the names.",
	Annotations: &mcp.ToolAnnotations{Title: "Change the target", DestructiveHint: ptr(false), IdempotentHint: true,
		OpenWorldHint: ptr(false)},
}

// targets is the targets tool.
func (s *Server) targets(ctx context.Context, req *mcp.CallToolRequest, _ targetsInput) (*mcp.CallToolResult, any, error) {
	se, err := s.session(req.Session, req.ClientInfo())
	if err != nil {
		return errorResult(err), nil, nil
	}
	reg, err := s.opts.Store.Load()
	if err != nil {
		return errorResult(err), nil, nil
	}
	var b strings.Builder
	target, from, err := se.route(ctx)
	if err != nil {
		fmt.Fprintf(&b, "current target: unknown: %v\n", err)
	} else if hosts, err := s.hostsOf(target); err != nil {
		fmt.Fprintf(&b, "current target: %s (from %s), which does not resolve: %v\n", target, from, err)
	} else {
		fmt.Fprintf(&b, "current target: %s: %s (from %s)\n", target, devices.Fold(hosts), from)
	}
	if s.opts.AllowRetarget {
		b.WriteString("use_target changes it.\n")
	} else {
		b.WriteString("The operator chooses the target; you cannot change it.\n")
	}
	b.WriteString("\nlocal: the operator's own machine\n")
	devs := reg.Devices()
	if len(devs) == 0 {
		b.WriteString("\nno devices are registered\n")
	} else {
		b.WriteString("\ndevices:\n")
		for _, d := range devs {
			fmt.Fprintf(&b, "  %s  %s", d.Name, d.Addr())
			if g := reg.GroupsOf(d.Name); len(g) > 0 {
				fmt.Fprintf(&b, "  groups: %s", strings.Join(g, ","))
			}
			if d.Description != "" {
				fmt.Fprintf(&b, "  — %s", d.Description)
			}
			b.WriteString("\n")
		}
	}
	if groups := reg.Groups(); len(groups) > 0 {
		b.WriteString("\ngroups:\n")
		for _, g := range groups {
			members := devices.Fold(g.Members)
			if members == "" {
				members = "(empty)"
			}
			fmt.Fprintf(&b, "  %s: %s\n", g.Name, members)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimSuffix(b.String(), "\n")}}}, nil, nil
}

// useTarget is the use_target tool.
func (s *Server) useTarget(ctx context.Context, req *mcp.CallToolRequest, in useTargetInput) (*mcp.CallToolResult, any, error) {
	se, err := s.session(req.Session, req.ClientInfo())
	if err != nil {
		return errorResult(err), nil, nil
	}
	spec := strings.TrimSpace(in.Target)
	if spec == "" {
		return errorResult(fmt.Errorf("target is empty; call targets to see the names")), nil, nil
	}
	if err := clientTarget(spec); err != nil {
		return errorResult(err), nil, nil
	}
	names, err := s.hostsOf(spec)
	if err != nil {
		return errorResult(fmt.Errorf("target %s: %w", spec, err)), nil, nil
	}
	se.mu.Lock()
	se.retarget = spec
	se.mu.Unlock()
	text := fmt.Sprintf("target %s: %s; every following call runs there", spec, devices.Fold(names))
	return &mcp.CallToolResult{
		Meta:    mcp.Meta{"rex/target": spec, "rex/hosts": names},
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
	}, nil, nil
}

// clientTarget refuses what a client may not put in a target it names: a
// ^FILE host list, which rex reads on the operator's machine, and whose
// lines would come back to the client as host names or in errors.
func clientTarget(spec string) error {
	for _, item := range strings.Split(spec, ",") {
		if strings.HasPrefix(strings.TrimPrefix(strings.TrimSpace(item), "!"), "^") {
			return fmt.Errorf("target %s: a client cannot name a host file (^FILE); call targets to see the devices and groups", spec)
		}
	}
	return nil
}

// hostsOf is the host names a target expands to.
func (s *Server) hostsOf(target string) ([]string, error) {
	hosts, err := s.opts.App.Resolve(target)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s names no hosts", target)
	}
	return names, nil
}
