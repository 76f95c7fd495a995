package main

import "errors"

// dumpDmesg writes the crashed kernel's log (VMCORE = o.args[0]) to
// LOGFILE (o.args[1]) in makedumpfile's --dump-dmesg format.
func dumpDmesg(o *options, c *console) error {
	return errors.New("--dump-dmesg is not implemented yet")
}
