package main

import (
	"errors"
	"fmt"
	"io"
	"os/exec"

	"github.com/spf13/pflag"
)

// command is what every pagepipe-bench subcommand starts with: its flag
// set, its usage line, and its one way to fail (one line on stderr naming
// the subcommand, exit status 1).
type command struct {
	*pflag.FlagSet
	name   string
	usage  string
	stderr io.Writer
}

func newCommand(name, usage string, stderr io.Writer) *command {
	c := &command{FlagSet: pflag.NewFlagSet(name, pflag.ContinueOnError), name: name, usage: usage, stderr: stderr}
	c.SetOutput(stderr)
	c.SortFlags = false
	c.Usage = func() {
		fmt.Fprintln(stderr, "usage: "+usage)
		c.PrintDefaults()
	}
	return c
}

// parse parses args. done is true when the command ends here, with
// code: --help (the usage, 0), or a bad flag (one line naming it, 1).
func (c *command) parse(args []string) (code int, done bool) {
	if err := c.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK, true
		}
		return c.fail(err), true
	}
	return 0, false
}

// badUsage writes the usage line and returns the exit status: the
// arguments left after the flags are not what the command takes.
func (c *command) badUsage() int {
	fmt.Fprintln(c.stderr, "usage: "+c.usage)
	return exitFailed
}

// failf writes the failure line and returns the exit status.
func (c *command) failf(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "pagepipe-bench "+c.name+": "+format+"\n", a...)
	return exitFailed
}

// fail is failf of an error, on one line.
func (c *command) fail(err error) int { return c.failf("%s", oneLine(err)) }

// measured finds the pagepipe binary a study runs (--pagepipe) and its
// identity for the study's record.
func measured(pagepipe string) (exe, ident string, err error) {
	if exe, err = exec.LookPath(pagepipe); err != nil {
		return "", "", fmt.Errorf("--pagepipe: %w", err)
	}
	if ident, err = binaryIdentity(exe); err != nil {
		return "", "", fmt.Errorf("--pagepipe: %w", err)
	}
	return exe, ident, nil
}
