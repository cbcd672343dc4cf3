package main

import (
	"fmt"
	"io"

	"github.com/ssegate/ssegate/pkg/position"
)

// decodeID prints each position id of args as one line per partition, "partition P offset O" (the last offset
// the client got or passed in P), for comparing with kcat (docs/runbook.md). An id that does not parse is
// reported on errOut with the reason the gateway would give in a resync, and makes the exit status 1.
func decodeID(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(errOut, "usage: gateway decode-id ID [ID...]")
		return 2
	}
	status := 0
	for _, id := range args {
		if len(args) > 1 {
			fmt.Fprintf(out, "%s\n", id)
		}
		v, err := position.Parse(id)
		if err != nil {
			fmt.Fprintf(errOut, "invalid id %q: %v\n", id, err)
			status = 1
			continue
		}
		if v.Len() == 0 {
			fmt.Fprintln(out, "no partition: the client has seen nothing yet")
		}
		for i := range v.Len() {
			e := v.At(i)
			fmt.Fprintf(out, "partition %d offset %d\n", e.Partition, e.Offset)
		}
	}
	return status
}
