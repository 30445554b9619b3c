package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rexconsole/rex/internal/commands"
)

func newDeviceCmd(e *env) *cobra.Command {
	cmd := parentCmd(&cobra.Command{
		Use:     "device",
		Aliases: []string{"devices"},
		Short:   "Manage devices and groups in the registry",
		Long: `Devices are named machines rex reaches over SSH; groups are named lists of
devices. Both live in ~/.config/rex/devices.json, which may be edited by hand.`,
		Example: `  rex device add web1 root@10.0.0.5 --port 2222
  rex device group create web && rex device group add web web1 web2
  rex device check web`,
	})
	cmd.AddCommand(
		newDeviceAddCmd(e), newDeviceRemoveCmd(e), newDeviceListCmd(e), newDeviceShowCmd(e),
		newGroupCmd(e),
		newImportCmd(e),
		newDeviceReachCmd(e, "check", "Test reachability, login and the cached rexd of TARGETS", "  rex device check web,db1"),
		newDeviceReachCmd(e, "prepare", "Install rexd on TARGETS without running anything", "  rex device prepare all"),
		newDeviceReachCmd(e, "clean", "Remove the cached rexd from TARGETS", "  rex device clean 'old-*'"),
	)
	return cmd
}

// storeCmd is a device verb that needs only the registry.
func storeCmd(e *env, c *cobra.Command, bind func(*pflag.FlagSet), run func(cmd *cobra.Command, s *commands.Setup, args []string) error) *cobra.Command {
	c.RunE = func(cmd *cobra.Command, args []string) error {
		s, err := e.Setup()
		if err != nil {
			return err
		}
		return run(cmd, s, args)
	}
	if bind != nil {
		bind(c.Flags())
	}
	return c
}

// exactArgs is cobra.ExactArgs with rex's usage error.
func exactArgs(n int, shape string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return commands.Usagef("%s takes %s", cmd.CommandPath(), shape)
		}
		return nil
	}
}

func minArgs(n int, shape string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return commands.Usagef("%s takes %s", cmd.CommandPath(), shape)
		}
		return nil
	}
}

func newDeviceAddCmd(e *env) *cobra.Command {
	var spec commands.DeviceAddSpec
	return storeCmd(e, &cobra.Command{
		Use:   "add NAME [USER@]HOST[:PORT]",
		Short: "Register a device; --force replaces one",
		Long: `Register a device. HOST takes every form TARGETS accepts for a host:
host, user@host, host:port, [ipv6]:port, ssh://user@host:port. A --key file
that does not exist is accepted with a warning, as ssh -i does.`,
		Example: `  rex device add web1 root@10.0.0.5
  rex device add db1 ssh://admin@db1.lan:2222 --key ~/.ssh/id_db --desc "primary"`,
	}, spec.Bind, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		if err := spec.Args(args); err != nil {
			return err
		}
		return commands.DeviceAdd(cmd.Context(), s.Store, e.io, spec)
	})
}

func newDeviceRemoveCmd(e *env) *cobra.Command {
	c := storeCmd(e, &cobra.Command{
		Use:               "remove NAME...",
		Short:             "Unregister devices and drop them from their groups",
		Example:           `  rex device remove web1 web2`,
		ValidArgsFunction: completeTargets(e, -1),
	}, nil, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		return commands.DeviceRemove(cmd.Context(), s.Store, e.io, args)
	})
	c.Args = minArgs(1, "one or more device NAMEs")
	return c
}

func newDeviceListCmd(e *env) *cobra.Command {
	var asJSON bool
	c := storeCmd(e, &cobra.Command{
		Use:     "list",
		Short:   "List the devices",
		Example: `  rex device list --json | jq -r '.devices[].name'`,
	}, func(fs *pflag.FlagSet) { commands.BindJSON(fs, &asJSON) }, func(_ *cobra.Command, s *commands.Setup, _ []string) error {
		return commands.DeviceList(s.Store, e.io, asJSON)
	})
	c.Args = exactArgs(0, "no arguments; use rex device show NAME for one device")
	return c
}

func newDeviceShowCmd(e *env) *cobra.Command {
	var asJSON bool
	c := storeCmd(e, &cobra.Command{
		Use:               "show NAME",
		Short:             "Show one device",
		Example:           `  rex device show web1 --json`,
		ValidArgsFunction: completeTargets(e, 0),
	}, func(fs *pflag.FlagSet) { commands.BindJSON(fs, &asJSON) }, func(_ *cobra.Command, s *commands.Setup, args []string) error {
		return commands.DeviceShow(s.Store, e.io, args[0], asJSON)
	})
	c.Args = exactArgs(1, "one device NAME")
	return c
}

func newGroupCmd(e *env) *cobra.Command {
	cmd := parentCmd(&cobra.Command{
		Use:   "group",
		Short: "Create, fill, empty and delete groups of devices",
		Example: `  rex device group create web
  rex device group add web web1 web2
  rex device group list`,
	})
	create := storeCmd(e, &cobra.Command{
		Use: "create NAME", Short: "Create an empty group", Example: `  rex device group create web`,
	}, nil, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		return commands.GroupCreate(cmd.Context(), s.Store, e.io, args[0])
	})
	create.Args = exactArgs(1, "one group NAME")
	del := storeCmd(e, &cobra.Command{
		Use: "delete NAME", Short: "Delete a group; its devices stay registered", Example: `  rex device group delete web`,
		ValidArgsFunction: completeTargets(e, 0),
	}, nil, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		return commands.GroupDelete(cmd.Context(), s.Store, e.io, args[0])
	})
	del.Args = exactArgs(1, "one group NAME")
	add := storeCmd(e, &cobra.Command{
		Use: "add GROUP DEVICE...", Short: "Add devices to a group", Example: `  rex device group add web web1 web2`,
	}, nil, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		return commands.GroupAdd(cmd.Context(), s.Store, e.io, args[0], args[1:])
	})
	add.Args = minArgs(2, "a GROUP and one or more DEVICE names")
	remove := storeCmd(e, &cobra.Command{
		Use: "remove GROUP DEVICE...", Short: "Remove devices from a group", Example: `  rex device group remove web web2`,
	}, nil, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		return commands.GroupRemove(cmd.Context(), s.Store, e.io, args[0], args[1:])
	})
	remove.Args = minArgs(2, "a GROUP and one or more DEVICE names")
	var asJSON bool
	list := storeCmd(e, &cobra.Command{
		Use: "list", Short: "List the groups and their members", Example: `  rex device group list --json`,
	}, func(fs *pflag.FlagSet) { commands.BindJSON(fs, &asJSON) }, func(_ *cobra.Command, s *commands.Setup, _ []string) error {
		return commands.GroupList(s.Store, e.io, asJSON)
	})
	list.Args = exactArgs(0, "no arguments")
	cmd.AddCommand(create, del, add, remove, list)
	return cmd
}

func newDeviceReachCmd(e *env, verb, short, example string) *cobra.Command {
	var connect time.Duration
	var excl commands.TargetFlags
	return storeCmd(e, &cobra.Command{
		Use:               verb + " TARGETS",
		Short:             short,
		Example:           example,
		ValidArgsFunction: completeTargets(e, 0),
	}, func(fs *pflag.FlagSet) {
		commands.BindConnectTimeout(fs, &connect)
		excl.Bind(fs)
	}, func(cmd *cobra.Command, s *commands.Setup, args []string) error {
		args = excl.Words(args)
		if len(args) > 0 {
			args = []string{excl.Spec(strings.Join(args, ","))}
		}
		return commands.DeviceReach(cmd.Context(), s.Store, s.DeviceRemote(), e.io, verb, args, connect)
	})
}

func newImportCmd(e *env) *cobra.Command {
	cmd := parentCmd(&cobra.Command{
		Use:   "import",
		Short: "Add the hosts (and groups) of an ssh_config, an Ansible inventory or a hosts file",
		Long: `Add every host of an inventory to the registry at once, in one locked save,
showing what is added. A name the registry has already (device or group)
stops the whole import unless --force replaces it; --dry-run shows what would
be added and changes nothing.`,
		Example: `  rex device import ssh-config
  rex device import ansible inventory.ini --dry-run
  rex device import hosts /etc/hosts`,
	})
	kind := func(name, use, short, long, example string, args cobra.PositionalArgs) *cobra.Command {
		var spec commands.ImportSpec
		c := storeCmd(e, &cobra.Command{Use: use, Short: short, Long: long, Example: example}, spec.Bind,
			func(cmd *cobra.Command, s *commands.Setup, args []string) error {
				if err := spec.Args(append([]string{name}, args...)); err != nil {
					return err
				}
				return commands.DeviceImport(cmd.Context(), s.Store, e.io, spec)
			})
		c.Args = args
		return c
	}
	cmd.AddCommand(
		kind("ssh-config", "ssh-config [FILE]", "Add the explicit Host entries of an ssh_config (default ~/.ssh/config)",
			`Each explicit Host alias (no wildcard) becomes a device of that name. From
~/.ssh/config a device reaches its alias, so ssh_config keeps applying as with
ssh ALIAS; from another file HostName, User, Port, IdentityFile and ProxyJump
are copied into the device.`,
			`  rex device import ssh-config
  rex device import ssh-config ./team/ssh_config --dry-run`, cobra.MaximumNArgs(1)),
		kind("ansible", "ansible INVENTORY", "Add the hosts and groups of an Ansible inventory (INI or YAML)",
			`Hosts become devices (ansible_host, ansible_user, ansible_port and
ansible_ssh_private_key_file are read, also from group vars); groups become
groups with every host below them ([group:children] flattened). Ansible's
implicit all and ungrouped are not imported as groups.`,
			`  rex device import ansible inventory.ini
  rex device import ansible hosts.yml --force`, exactArgs(1, "one INVENTORY file")),
		kind("hosts", "hosts FILE", "Add the entries of a hosts file (/etc/hosts format)",
			`Each "ADDRESS NAME [ALIAS...]" line becomes a device NAME reaching ADDRESS.
Loopback and multicast addresses and the localhost names are left out.`,
			`  rex device import hosts /etc/hosts`, exactArgs(1, "one FILE")),
	)
	return cmd
}
